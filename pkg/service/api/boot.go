package api

import (
	"context"
	"slices"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// bootSkew is how far in the future an agent's boot times may be (its
// clock against the API's) before a registration is refused.
const bootSkew = 5 * time.Minute

// parseBoot reads a registration's boot times: each optional, RFC 3339,
// in order (launch, agent start, runner ready, warmed up), none after now +
// bootSkew.
func parseBoot(b *wire.BootTimes, now time.Time) (worker.Boot, error) {
	var out worker.Boot
	if b == nil {
		return out, nil
	}
	fields := []struct {
		name, val string
		into      *time.Time
	}{
		{"boot.launched_at", b.LaunchedAt, &out.LaunchedAt},
		{"boot.agent_started_at", b.AgentStartedAt, &out.AgentStartedAt},
		{"boot.runner_ready_at", b.RunnerReadyAt, &out.RunnerReadyAt},
		{"boot.warmed_up_at", b.WarmedUpAt, &out.WarmedUpAt},
	}
	var prev time.Time
	prevName := ""
	for _, f := range fields {
		if f.val == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, f.val)
		if err != nil {
			return out, invalid("field %q: %q is not an RFC 3339 time", f.name, f.val)
		}
		if t.After(now.Add(bootSkew)) {
			return out, invalid("field %q: %s is in the future", f.name, f.val)
		}
		if !prev.IsZero() && t.Before(prev) {
			return out, invalid("field %q: %s is before %s", f.name, f.val, prevName)
		}
		*f.into, prev, prevName = t.UTC(), t, f.name
	}
	return out, nil
}

// bootPoints are the moments of an instance's way to its first job, in
// order; a phase runs from one a worker has to the next it has, and is
// named for both ("runner_ready_to_registered" for a worker without a
// warm-up, "runner_ready_to_warmed_up" and "warmed_up_to_registered" for
// one with).
var bootPoints = []struct {
	name string
	at   func(worker.Worker) time.Time
}{
	{"launch", func(w worker.Worker) time.Time { return w.Boot.LaunchedAt }},
	{"agent", func(w worker.Worker) time.Time { return w.Boot.AgentStartedAt }},
	{"runner_ready", func(w worker.Worker) time.Time { return w.Boot.RunnerReadyAt }},
	{"warmed_up", func(w worker.Worker) time.Time { return w.Boot.WarmedUpAt }},
	{"registered", func(w worker.Worker) time.Time { return w.RegisteredAt }},
	{"first_lease", func(w worker.Worker) time.Time { return w.FirstClaimAt }},
}

// bootPhase is one phase of one worker's boot.
type bootPhase struct {
	from, to int // indexes in bootPoints
	d        time.Duration
}

// workerBoot is a worker's phases, in order: between each two consecutive
// moments it has.
func workerBoot(w worker.Worker) []bootPhase {
	var out []bootPhase
	prev := -1
	for i, p := range bootPoints {
		t := p.at(w)
		if t.IsZero() {
			continue
		}
		if prev >= 0 {
			if from := bootPoints[prev].at(w); !t.Before(from) {
				out = append(out, bootPhase{from: prev, to: i, d: t.Sub(from)})
			}
		}
		prev = i
	}
	return out
}

// fleetBoot is the boot timeline of a fleet's workers: each phase's median
// and longest over the workers that have it, in the order of the moments,
// and the phase with the longest median; nil when no worker has any. A
// worker that reported itself unhealthy (a failed warm-up among others)
// is left out: its boot did not end in work.
func fleetBoot(ws []worker.Worker) *wire.FleetBoot {
	type key struct{ from, to int }
	ds := map[key][]float64{}
	counted := 0
	for _, w := range ws {
		if w.Status == worker.Unhealthy {
			continue
		}
		phases := workerBoot(w)
		if len(phases) > 0 {
			counted++
		}
		for _, p := range phases {
			k := key{p.from, p.to}
			ds[k] = append(ds[k], p.d.Seconds())
		}
	}
	if len(ds) == 0 {
		return nil
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
	out := &wire.FleetBoot{Workers: counted, Phases: []wire.BootPhase{}}
	var slowest float64
	for _, k := range keys {
		d := ds[k]
		slices.Sort(d)
		p := wire.BootPhase{Name: bootPoints[k.from].name + "_to_" + bootPoints[k.to].name,
			Workers: len(d), P50S: round1(d[(len(d)-1)/2]), MaxS: round1(d[len(d)-1])}
		out.Phases = append(out.Phases, p)
		if p.P50S > slowest || out.Slowest == "" {
			slowest, out.Slowest = p.P50S, p.Name
		}
	}
	return out
}

func round1(s float64) float64 { return float64(int64(s*10+0.5)) / 10 }

// fleetWorkers reads a fleet's workers whole (the fleet index leaves the
// boot times out).
func (s *server) fleetWorkers(ctx context.Context, fleet string) ([]worker.Worker, error) {
	ws, err := s.Store.ListWorkers(ctx, fleet)
	if err != nil {
		return nil, err
	}
	out := make([]worker.Worker, 0, len(ws))
	for _, w := range ws {
		full, err := s.Store.GetWorker(ctx, w.ID)
		if err != nil {
			continue // gone since the listing
		}
		out = append(out, full)
	}
	return out, nil
}
