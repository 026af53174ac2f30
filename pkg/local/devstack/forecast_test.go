package devstack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/forecast"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// With yesterday's 09:00 hour in the fleet's memory (6 jobs arrived, 2 at
// work on average), the live fleet is warm at 09:00 before any job: the
// tick launches for the expected work (2 + 6/h over the 5m lead = 2.5
// slots, 2 instances of 2 slots), their agents boot and register, and the
// hour's first job is leased on the next poll, with no boot to wait for.
func TestForecastWarmsTheLiveFleetAheadOfItsUsualHour(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(at)
	cfg := fleetconfig.Default()
	cfg.Fleets[0].Forecast = fleetconfig.Forecast{Enabled: true, BudgetGPUHoursPerDay: 10, LookbackDays: 7}
	stack, requests := startWatched(t, cfg, clk, devstack.FleetOptions{BootDelay: 2 * time.Minute, LocalAgents: true})
	fleet := cfg.Fleets[0].Slug
	mem := fleetstate.Forecast{At: at.Add(-time.Minute),
		Hours: forecast.History{forecast.HourOf(at.Add(-24 * time.Hour)): {Arrivals: 6, Work: 2, Ticks: 1}}}
	seed := fleetstate.Record{Decision: fleetstate.Decision{At: at.Add(-time.Minute), Reason: scaling.RecordedReason("", "seed")}, Forecast: &mem}
	if err := stack.Store.RecordDecision(ctx, fleet, seed, fleetstate.State{}); err != nil {
		t.Fatal(err)
	}

	reports, err := stack.Scaler.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := reports[0]; r.Desired != 2 || !strings.Contains(r.Decision.Reason.String(), "forecast: 6.0 jobs/h and 2.0 concurrent expected (1 days) → 2") {
		t.Fatalf("tick with no job: desired %d (%s); want 2 from the forecast", r.Desired, r.Decision.Reason)
	}
	clk.Advance(2 * time.Minute)
	stack.Fleet.Step(ctx, 0)
	testenv.Eventually(t, "two warm workers registered", requests, func() bool {
		ws, err := stack.Store.ListWorkers(ctx, fleet)
		return err == nil && len(ws) == 2
	})

	submit(t, stack, map[string]any{"job_id": "acme:first-of-the-hour", "tenant_id": "acme", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 5}})
	var j job.Job
	testenv.Eventually(t, "the job dispatched", stack.Dispatched(), func() bool {
		j, err = stack.Store.GetJob(ctx, "acme:first-of-the-hour")
		return err == nil && j.Status != job.Accepted
	})
	// Once both idle agents wait for their next poll, each polls within
	// a poll interval and its jitter (5 s, at most 6 s).
	testenv.Waiters(t, clk, fleetWaits+2*pollWaits)
	clk.Advance(6 * time.Second)
	testenv.Eventually(t, "the job leased", requests, func() bool {
		j, err = stack.Store.GetJob(ctx, "acme:first-of-the-hour")
		return err == nil && !j.FirstLeasedAt.IsZero()
	})
	// The agents' next poll takes it: seconds, not the 2-minute boot a cold
	// fleet would make it wait.
	if wait := j.FirstLeasedAt.Sub(j.CreatedAt); wait > 30*time.Second {
		t.Fatalf("the job waited %s for a worker; a warm fleet leases it on the next poll", wait)
	}
}
