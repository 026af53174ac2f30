package api

import (
	"context"
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
	if b.FromPool && b.LaunchedAt == "" {
		return out, invalid("field %q: a start from a warm pool needs %q, when it started", "boot.from_pool", "boot.launched_at")
	}
	out.FromPool = b.FromPool
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

// spotPoolBoot is the boot of an instance the attestation found started in
// its fleet's Spot pool: it began at the pool's start (the pool record's
// time of the start when the record is still starting; else the time the
// agent reported, its instance's last start), a phase of its own.
func spotPoolBoot(b worker.Boot, startedAt time.Time) worker.Boot {
	b.SpotPool = true
	if !startedAt.IsZero() {
		b.LaunchedAt = startedAt.UTC()
	}
	return b
}

// fleetBoot is the boot timeline of a fleet's workers as the API shows it
// (worker.BootTimeline); nil when no worker has a phase.
func fleetBoot(ws []worker.Worker) *wire.FleetBoot {
	tl := worker.BootTimeline(ws)
	if tl.Workers == 0 {
		return nil
	}
	out := &wire.FleetBoot{Workers: tl.Workers, Slowest: tl.Slowest, Phases: []wire.BootPhase{}}
	for _, p := range tl.Phases {
		out.Phases = append(out.Phases, wire.BootPhase{Name: p.Name, Workers: p.Workers,
			P50S: round1(p.P50.Seconds()), P95S: round1(p.P95.Seconds()), MaxS: round1(p.Max.Seconds())})
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
