package worker

import (
	"slices"
	"time"
)

// A boot's moments, in order. An instance starts at its launch, at its
// start from a warm pool (a bridge: PoolStart), or at its start from the
// fleet's stopped Spot pool (SpotPoolStart); a phase runs from one moment
// a worker has to the next it has. The two pool starts are moments of
// their own, not one moment with a field beside it: a fleet's timeline
// gathers phases by their moments alone, so only distinct moments keep a
// bridge's start and a Spot pool's apart.
const (
	PointLaunch        = "launch"
	PointPoolStart     = "pool_start"
	PointSpotPoolStart = "spot_pool_start"
	PointAgent         = "agent"
	PointRunnerReady   = "runner_ready"
	PointWarmedUp      = "warmed_up"
	PointRegistered    = "registered"
	PointFirstLease    = "first_lease"
)

// bootPoints are the moments in order; launch and the two pool starts are
// the same place (an instance has one of them).
var bootPoints = []struct {
	name string
	at   func(Worker) time.Time
}{
	{PointLaunch, startedAs(PointLaunch)},
	{PointPoolStart, startedAs(PointPoolStart)},
	{PointSpotPoolStart, startedAs(PointSpotPoolStart)},
	{PointAgent, func(w Worker) time.Time { return w.Boot.AgentStartedAt }},
	{PointRunnerReady, func(w Worker) time.Time { return w.Boot.RunnerReadyAt }},
	{PointWarmedUp, func(w Worker) time.Time { return w.Boot.WarmedUpAt }},
	{PointRegistered, func(w Worker) time.Time { return w.RegisteredAt }},
	{PointFirstLease, func(w Worker) time.Time { return w.FirstClaimAt }},
}

// startedAs is the moment point of a worker's boot when its instance
// started that way (launch, pool_start or spot_pool_start), else zero.
func startedAs(point string) func(Worker) time.Time {
	return func(w Worker) time.Time {
		if w.Boot.StartPoint() != point {
			return time.Time{}
		}
		return w.Boot.LaunchedAt
	}
}

// StartPoint is the moment a boot's LaunchedAt is: PointSpotPoolStart,
// PointPoolStart or PointLaunch.
func (b Boot) StartPoint() string {
	switch {
	case b.SpotPool:
		return PointSpotPoolStart
	case b.FromPool:
		return PointPoolStart
	}
	return PointLaunch
}

// PhaseName is the name of the phase from one moment to another:
// "launch_to_agent", "spot_pool_start_to_agent", "runner_ready_to_warmed_up", ...
func PhaseName(from, to string) string { return from + "_to_" + to }

// Phase is one phase of one worker's boot.
type Phase struct {
	Name string
	// from and to order phases: indexes in bootPoints.
	from, to int
	Took     time.Duration
}

// BootPhases are a worker's phases, in order: between each two consecutive
// moments it reported (or the store recorded).
func (w Worker) BootPhases() []Phase {
	var out []Phase
	prev := -1
	for i, p := range bootPoints {
		t := p.at(w)
		if t.IsZero() {
			continue
		}
		if prev >= 0 {
			if from := bootPoints[prev].at(w); !t.Before(from) {
				out = append(out, Phase{Name: PhaseName(bootPoints[prev].name, p.name), from: prev, to: i, Took: t.Sub(from)})
			}
		}
		prev = i
	}
	return out
}

// PhaseStats are one phase over a fleet's workers: how many have it, and
// its median, 95th percentile and longest (nearest rank).
type PhaseStats struct {
	Name          string
	Workers       int
	P50, P95, Max time.Duration
}

// Timeline is a fleet's boot timeline: each phase's stats, in the order of
// the moments, the phase with the longest median, and how many workers
// have any phase.
type Timeline struct {
	Workers int
	Phases  []PhaseStats
	Slowest string
}

// BootTimeline is the boot timeline of workers. A worker that reported
// itself unhealthy (a failed warm-up among others) is left out: its boot
// did not end in work. Zero Workers: no worker has a phase.
func BootTimeline(ws []Worker) Timeline {
	type key struct{ from, to int }
	ds := map[key][]time.Duration{}
	names := map[key]string{}
	var out Timeline
	for _, w := range ws {
		if w.Status == Unhealthy {
			continue
		}
		phases := w.BootPhases()
		if len(phases) > 0 {
			out.Workers++
		}
		for _, p := range phases {
			k := key{p.from, p.to}
			ds[k] = append(ds[k], p.Took)
			names[k] = p.Name
		}
	}
	keys := make([]key, 0, len(ds))
	for k := range ds {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.from != b.from {
			return a.from - b.from
		}
		return a.to - b.to
	})
	var slowest time.Duration
	for _, k := range keys {
		d := ds[k]
		slices.Sort(d)
		rank := func(q float64) time.Duration {
			i := int(q*float64(len(d))+0.999999) - 1 // nearest rank
			return d[min(max(i, 0), len(d)-1)]
		}
		p := PhaseStats{Name: names[k], Workers: len(d), P50: d[(len(d)-1)/2], P95: rank(0.95), Max: d[len(d)-1]}
		out.Phases = append(out.Phases, p)
		if p.P50 > slowest || out.Slowest == "" {
			slowest, out.Slowest = p.P50, p.Name
		}
	}
	return out
}
