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
// in order (launch, agent start, runner ready), none after now + bootSkew.
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

// bootPhases are the phases of an instance's way to its first job, each
// between two of a worker's times.
var bootPhases = []struct {
	name     string
	from, to func(worker.Worker) time.Time
}{
	{"launch_to_agent", func(w worker.Worker) time.Time { return w.Boot.LaunchedAt }, func(w worker.Worker) time.Time { return w.Boot.AgentStartedAt }},
	{"agent_to_runner_ready", func(w worker.Worker) time.Time { return w.Boot.AgentStartedAt }, func(w worker.Worker) time.Time { return w.Boot.RunnerReadyAt }},
	{"runner_ready_to_registered", func(w worker.Worker) time.Time { return w.Boot.RunnerReadyAt }, func(w worker.Worker) time.Time { return w.RegisteredAt }},
	{"registered_to_first_lease", func(w worker.Worker) time.Time { return w.RegisteredAt }, func(w worker.Worker) time.Time { return w.FirstClaimAt }},
}

// fleetBoot is the boot timeline of a fleet's workers: each phase's median
// and longest over the workers that have both its ends, and the phase with
// the longest median; nil when no worker has any.
func fleetBoot(ws []worker.Worker) *wire.FleetBoot {
	out := &wire.FleetBoot{Phases: []wire.BootPhase{}}
	counted := map[string]bool{}
	var slowest float64
	for _, ph := range bootPhases {
		var ds []float64
		for _, w := range ws {
			from, to := ph.from(w), ph.to(w)
			if from.IsZero() || to.IsZero() || to.Before(from) {
				continue
			}
			ds = append(ds, to.Sub(from).Seconds())
			counted[w.ID] = true
		}
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		p := wire.BootPhase{Name: ph.name, Workers: len(ds), P50S: round1(ds[(len(ds)-1)/2]), MaxS: round1(ds[len(ds)-1])}
		out.Phases = append(out.Phases, p)
		if p.P50S > slowest || out.Slowest == "" {
			slowest, out.Slowest = p.P50S, p.Name
		}
	}
	if len(out.Phases) == 0 {
		return nil
	}
	out.Workers = len(counted)
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
