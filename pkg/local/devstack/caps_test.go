package devstack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// A tenant with max_leased 2 and 10 jobs on a fleet of idle workers with
// room for 6: at most 2 of its jobs run at once and all finish; neither the
// wake on enqueue nor the scaler launches for the capped backlog.
func TestMaxLeasedHoldsOnTheLiveStack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	cfg := fleetconfig.Default()
	cfg.Tenants = append(cfg.Tenants, fleetconfig.Tenant{ID: "capped", MaxLeased: 2})
	stack, requests := startWatched(t, cfg, clk, devstack.FleetOptions{BootDelay: 10 * time.Second, LocalAgents: true})
	for i := range 10 {
		submit(t, stack, map[string]any{"job_id": fmt.Sprintf("capped-%d", i), "tenant_id": "capped", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 20}})
	}
	count := func(status job.Status) int {
		js, err := stack.Store.ListJobs(ctx, "demo", status, 0)
		if err != nil {
			return -1
		}
		return len(js)
	}
	testenv.Eventually(t, "the jobs dispatched", stack.Dispatched(), func() bool { return count(job.Queued) == 10 })
	// The wake on enqueue and the tick size for the 2 jobs that can run:
	// one instance of 2 slots, not the 5 (max 4) the 10 jobs would need.
	g, err := stack.Fleet.Describe(ctx, "demo")
	if err != nil || g.Desired > 1 {
		t.Fatalf("woken group desired %d, %v; want at most 1", g.Desired, err)
	}
	reports, err := stack.Scaler.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := reports[0]; r.Desired != 1 || !strings.Contains(r.Reason.String(), "max_leased") {
		t.Fatalf("tick: desired %d (%s); want 1, limited by the cap", r.Desired, r.Reason)
	}
	// Several idle workers: three instances, six slots.
	if err := stack.Fleet.SetDesired(ctx, "demo", 3); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	stack.Fleet.Step(ctx, 0)
	testenv.Eventually(t, "three workers registered", requests, func() bool {
		ws, err := stack.Store.ListWorkers(ctx, "demo")
		return err == nil && len(ws) == 3
	})
	testenv.Eventually(t, "two jobs leased", requests, func() bool { return count(job.Leased) == 2 })
	// The jobs sleep 20 s each: step the clock 5 s at a time, each step
	// once the agents are at rest, until every job has succeeded.
	peak := 0
	for step := 0; ; step++ {
		atRest(t, clk, requests, func() int { return restWaits(stack, "demo") })
		n := count(job.Leased)
		peak = max(peak, n)
		if n > 2 {
			t.Fatalf("%d of the capped tenant's jobs leased at once, cap 2", n)
		}
		if count(job.Succeeded) == 10 {
			break
		}
		if step == 200 {
			t.Fatalf("%d of 10 jobs succeeded after %d steps of 5s", count(job.Succeeded), step)
		}
		clk.Advance(5 * time.Second)
	}
	if n, err := stack.Store.TenantLeasedJobs(ctx, "capped"); err != nil || n != 0 || peak != 2 {
		t.Fatalf("after the run: counter %d (%v), peak leased %d; want 0 and 2", n, err, peak)
	}
}
