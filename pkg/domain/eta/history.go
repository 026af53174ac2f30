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
// elapsed. Once elapsed passes every duration known it is expected to end
// at any moment (0). ok false when there are none.
func (h History) Remaining(elapsed time.Duration) (time.Duration, bool) {
	if len(h) == 0 {
		return 0, false
	}
	var longer History
	for _, d := range h {
		if d > elapsed {
			longer = append(longer, d)
		}
	}
	m, ok := longer.Median()
	if !ok {
		return 0, true
	}
	return m - elapsed, true
}
