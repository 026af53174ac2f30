package devstack_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// warmStack is the dev stack whose demo fleet warms its runners up with
// the sleep runner's input, and the signal of its agents' requests.
func warmStack(t *testing.T, input map[string]any) (*devstack.Stack, *clock.Fake, <-chan struct{}) {
	t.Helper()
	cfg := fleetconfig.Default()
	cfg.Fleets[0].SlotsPerInstance = 1
	cfg.Fleets[0].Agent.Warmup = fleetconfig.Warmup{Input: input, Timeout: fleetconfig.Duration(2 * time.Minute)}
	clk := clock.NewFake(time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC))
	stack, requests := startWatched(t, cfg, clk, devstack.FleetOptions{BootDelay: bootDelay, LocalAgents: true})
	return stack, clk, requests
}

// warmupWaits are the warm-up's waits on the clock: the sleep runner's
// timer and the warm-up's timeout.
const warmupWaits = 2

// bootWarming launches the demo fleet's instance for a submitted job and
// boots it, and waits until its agent is warming up; it answers the
// instance's id.
func bootWarming(t *testing.T, stack *devstack.Stack, clk *clock.Fake, jobID string) string {
	t.Helper()
	ctx := context.Background()
	submit(t, stack, map[string]any{"job_id": jobID, "tenant_id": "t1", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 5}})
	testenv.Eventually(t, "the wake launched an instance", stack.Dispatched(), func() bool {
		g, _ := stack.Fleet.Describe(ctx, "demo")
		return g.Desired == 1
	})
	clk.Advance(bootDelay)
	stack.Fleet.Step(ctx, 0)
	testenv.Waiters(t, clk, fleetWaits+warmupWaits)
	g, _ := stack.Fleet.Describe(ctx, "demo")
	if len(g.Instances) != 1 {
		t.Fatalf("instances %+v", g.Instances)
	}
	if ws, err := stack.Store.ListWorkers(ctx, "demo"); err != nil || len(ws) != 0 {
		t.Fatalf("workers %+v (%v) while the runner warms up", ws, err)
	}
	return g.Instances[0].ID
}

// A local instance of a fleet with a warm-up runs it after its runner is
// ready and before it registers: the first job is leased only after the
// warm-up, and the fleet's boot timeline shows the warm-up as a phase of
// its own.
func TestDevStackWarmsRunnersBeforeTheirFirstJob(t *testing.T) {
	t.Parallel()
	stack, clk, requests := warmStack(t, map[string]any{"seconds": 30})
	bootWarming(t, stack, clk, "w-1")
	if j := jobOf(stack, "t1:w-1"); j.Status != job.Queued {
		t.Fatalf("the job is %s while the runner warms up", j.Status)
	}
	clk.Advance(30 * time.Second)
	testenv.Eventually(t, "the job leased after the warm-up", requests, func() bool { return jobOf(stack, "t1:w-1").Status == job.Leased })
	var fleets wire.FleetsResponse
	getJSON(t, stack, "/api/admin/fleets", &fleets)
	boot := fleets.Fleets[0].Boot
	if boot == nil || boot.Slowest != "runner_ready_to_warmed_up" {
		t.Fatalf("boot timeline %+v: want the warm-up the slowest phase", boot)
	}
	i := slices.IndexFunc(boot.Phases, func(p wire.BootPhase) bool { return p.Name == "runner_ready_to_warmed_up" })
	if i < 0 || boot.Phases[i].P50S != 30 || boot.Phases[i].Workers != 1 {
		t.Fatalf("phases %+v: want the 30 s warm-up of one worker", boot.Phases)
	}
}

// A local instance whose warm-up fails shows as an unhealthy worker that
// leased nothing, and the next tick terminates it, as it does an instance
// whose GPU turned sick; no busy instance is killed.
func TestDevStackReplacesAnInstanceThatDidNotWarmUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack, clk, requests := warmStack(t, map[string]any{"seconds": 10, "fail": "model weights missing"})
	sick := bootWarming(t, stack, clk, "w-2")
	clk.Advance(10 * time.Second)
	testenv.Eventually(t, "the worker reported unhealthy", requests, func() bool {
		w, err := stack.Store.GetWorker(ctx, sick)
		return err == nil && w.Status == worker.Unhealthy
	})
	if j := jobOf(stack, "t1:w-2"); j.Status != job.Queued || j.Attempts != 0 {
		t.Fatalf("the job is %s after %d attempts: a machine that did not warm up took it", j.Status, j.Attempts)
	}
	r := tickDemo(t, stack)
	if !slices.Contains(r.Terminated, sick) {
		t.Fatalf("tick terminated %v, want the instance %s that did not warm up: %s", r.Terminated, sick, r.Decision.Reason)
	}
	if st := stack.Fleet.Stats(); st.KilledBusy != 0 {
		t.Fatalf("killed %d busy instances", st.KilledBusy)
	}
}
