package eta

import (
	"slices"
	"time"
)

// Median is the middle of the durations (the lower of the two middles),
// ok false when there are none.
func (h History) Median() (time.Duration, bool) {
	if len(h) == 0 {
		return 0, false
	}
	s := slices.Clone(h)
	slices.Sort(s)
	return s[(len(s)-1)/2], true
}

// Remaining is how much longer something that has run for elapsed is
// expected to take: the median of the durations longer than elapsed, less
// elapsed. Once elapsed passes every duration known, it is the median of
// Overrun's. ok false when there are none.
func (h History) Remaining(elapsed time.Duration) (time.Duration, bool) {
	if len(h) == 0 {
		return 0, false
	}
	m, ok := h.longer(elapsed).Median()
	if !ok {
		m, _ = h.Overrun().Median()
		return m, true
	}
	return m - elapsed, true
}

// longer are the durations longer than elapsed.
func (h History) longer(elapsed time.Duration) History {
	var out History
	for _, d := range h {
		if d > elapsed {
			out = append(out, d)
		}
	}
	return out
}

// Overrun is how long the longest take past the history's upper quartile:
// each duration above it, less it. It stands for how much longer something
// that has run past every duration known is still to take (empty: the
// durations are all the same, and it is expected to end at once).
func (h History) Overrun() History {
	if len(h) == 0 {
		return nil
	}
	s := slices.Clone(h)
	slices.Sort(s)
	q := s[3*(len(s)-1)/4]
	var out History
	for _, d := range s {
		if d > q {
			out = append(out, d-q)
		}
	}
	return out
}
