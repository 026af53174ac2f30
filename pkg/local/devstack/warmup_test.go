package devstack_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

// warmStack is the dev stack whose demo fleet warms its runners up with
// the sleep runner's input.
func warmStack(t *testing.T, input map[string]any) (*devstack.Stack, *clock.Fake) {
	t.Helper()
	cfg := fleetconfig.Default()
	cfg.Fleets[0].SlotsPerInstance = 1
	cfg.Fleets[0].Agent.Warmup = fleetconfig.Warmup{Input: input, Timeout: fleetconfig.Duration(2 * time.Minute)}
	clk := clock.NewFake(time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC))
	stack, err := devstack.Start(context.Background(), devstack.Options{
		Addr: "127.0.0.1:0", Config: cfg, Logger: slog.New(slog.DiscardHandler), Clock: clk,
		Fleet: devstack.FleetOptions{Tick: -1, BootDelay: bootDelay, LocalAgents: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	return stack, clk
}

// A local instance of a fleet with a warm-up runs it after its runner is
// ready and before it registers: the first job is leased only after the
// warm-up, and the fleet's boot timeline shows the warm-up as a phase of
// its own.
func TestDevStackWarmsRunnersBeforeTheirFirstJob(t *testing.T) {
	ctx := context.Background()
	stack, clk := warmStack(t, map[string]any{"seconds": 30})
	submit(t, stack, map[string]any{"job_id": "w-1", "tenant_id": "t1", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 5}})
	eventually(t, "the wake launched an instance", func() bool {
		g, _ := stack.Fleet.Describe(ctx, "demo")
		return g.Desired == 1
	})
	clk.Advance(bootDelay)
	stack.Fleet.Step(ctx, 0)
	booted := clk.Now()
	pump(t, clk, 5*time.Second, "the job leased after the warm-up", func() bool { return jobOf(stack, "t1:w-1").Status != job.Queued })
	if waited := clk.Now().Sub(booted); waited < 30*time.Second {
		t.Fatalf("the job was leased %s after the boot, before the 30 s warm-up ended", waited)
	}
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
	ctx := context.Background()
	stack, clk := warmStack(t, map[string]any{"seconds": 10, "fail": "model weights missing"})
	submit(t, stack, map[string]any{"job_id": "w-2", "tenant_id": "t1", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 5}})
	eventually(t, "the wake launched an instance", func() bool {
		g, _ := stack.Fleet.Describe(ctx, "demo")
		return g.Desired == 1
	})
	clk.Advance(bootDelay)
	stack.Fleet.Step(ctx, 0)
	g, _ := stack.Fleet.Describe(ctx, "demo")
	if len(g.Instances) != 1 {
		t.Fatalf("instances %+v", g.Instances)
	}
	sick := g.Instances[0].ID
	pump(t, clk, 5*time.Second, "the worker reported unhealthy", func() bool {
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
