package eta

import (
	"slices"
	"sort"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// Boots are the workers' boots, launch to registration: what a fleet's
// instances took to take work (Snapshot.Boot). Workers started from a warm
// pool or the Spot pool, that reported no launch, or that reported
// themselves unhealthy are left out (as worker.BootTimeline leaves the
// last out).
func Boots(ws []worker.Worker) History {
	var h History
	for _, w := range ws {
		b := w.Boot
		if b.StartPoint() != worker.PointLaunch || b.LaunchedAt.IsZero() || w.Status == worker.Unhealthy || !w.RegisteredAt.After(b.LaunchedAt) {
			continue
		}
		h = append(h, w.RegisteredAt.Sub(b.LaunchedAt))
	}
	return h
}

// sorted is a copy of the history, shortest first.
func (h History) sorted() History {
	s := slices.Clone(h)
	slices.Sort(s)
	return s
}

// Draw answers how much longer something of this kind that has run for
// elapsed is still to take, by one of the durations known longer than
// elapsed, less elapsed; pick(n) chooses which of n. Past every duration
// known, it is one of the overruns: how far a duration above the upper
// quartile lies above it (0 when none does). ok false when the history is
// empty. The history must be sorted.
func (h History) Draw(elapsed time.Duration, pick func(n int) int) (time.Duration, bool) {
	n := len(h)
	if n == 0 {
		return 0, false
	}
	if i := sort.Search(n, func(i int) bool { return h[i] > elapsed }); i < n {
		return h[i+pick(n-i)] - elapsed, true
	}
	q := h[3*(n-1)/4]
	i := sort.Search(n, func(i int) bool { return h[i] > q })
	if i == n {
		return 0, true
	}
	return h[i+pick(n-i)] - q, true
}
