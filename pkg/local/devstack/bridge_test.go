package devstack_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// An empty fleet with a stopped pool of one: the first job is leased by the
// bridge instance started from the pool in a quarter of the boot, the next
// job by the Spot instance launched beside it, and once the bridge's job
// is done it is stopped back into the pool; no busy instance is ever
// stopped or killed.
func TestDevStackBridgesAColdStartFromAStoppedPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := fleetconfig.Default()
	cfg.Fleets[0].SlotsPerInstance = 1
	cfg.Fleets[0].Bridge = fleetconfig.Bridge{Pool: 1}
	clk := clock.NewFake(time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC))
	stack, requests := startWatched(t, cfg, clk, devstack.FleetOptions{BootDelay: bootDelay, PoolStart: 0.25, LocalAgents: true})
	pooled := stack.Fleet.Pooled("demo")
	if len(pooled) != 1 {
		t.Fatalf("pool %v, want one stopped instance", pooled)
	}
	bridge := pooled[0]
	checkNothingBusyStopped := func() {
		t.Helper()
		if st := stack.Fleet.Stats(); st.StoppedBusy != 0 || st.KilledBusy != 0 {
			t.Fatalf("stopped %d and killed %d busy instances", st.StoppedBusy, st.KilledBusy)
		}
	}

	// The first job wakes the fleet: the Spot group for it, and the bridge.
	submit(t, stack, map[string]any{"job_id": "b-1", "tenant_id": "t1", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 60}})
	testenv.Eventually(t, "the wake raised Spot and started the bridge", stack.Dispatched(), func() bool {
		spot, _ := stack.Fleet.Describe(ctx, "demo")
		od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo")
		return spot.Desired == 1 && od.Desired == 1
	})
	// The fleet's decisions say when and why: the wake, then the bridge it
	// started, counted with Spot in the desired capacity.
	st, err := stack.Store.GetFleetState(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.History) < 2 || st.History[0].Reason.String() != "bridge 1: 1 ready jobs, 0 idle workers, Spot launching" || st.History[0].Reason.Code() != scaling.ReasonBridge ||
		st.History[0].Desired != 2 || st.History[0].Inputs.Map()["on_demand_desired"] != 1 || !strings.HasPrefix(st.History[1].Reason.String(), "woken by 1 ready job") {
		t.Fatalf("decisions after the wake: %+v", st.History)
	}
	clk.Advance(bootDelay / 4)
	stack.Fleet.Step(ctx, 0)
	testenv.Eventually(t, "the bridge leased the first job", requests, func() bool {
		j := jobOf(stack, "t1:b-1")
		return j.Status == job.Leased && j.WorkerID == bridge
	})

	// The next job finds no free slot and the pool in use: it waits for Spot.
	submit(t, stack, map[string]any{"job_id": "b-2", "tenant_id": "t1", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 300}})
	testenv.Eventually(t, "the second job queued", stack.Dispatched(), func() bool { return jobOf(stack, "t1:b-2").Status == job.Queued })
	if od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo"); od.Desired != 1 {
		t.Fatalf("On-Demand desired %d with a pool of one", od.Desired)
	}
	clk.Advance(bootDelay - bootDelay/4)
	stack.Fleet.Step(ctx, 0)
	testenv.Eventually(t, "a Spot instance leased the second job", requests, func() bool {
		j := jobOf(stack, "t1:b-2")
		return j.Status == job.Leased && j.WorkerID != bridge && !strings.Contains(j.WorkerID, "-od-")
	})

	// Every local instance's boot shows in the fleet's timeline: the
	// bridge took a quarter of the boot from its start from the pool to its
	// agent, the Spot instance the whole boot from its launch.
	var fleets struct {
		Fleets []struct {
			FleetSlug string `json:"fleet_slug"`
			Boot      *struct {
				Workers int `json:"workers"`
				Phases  []struct {
					Name string  `json:"name"`
					P50S float64 `json:"p50_s"`
					MaxS float64 `json:"max_s"`
				} `json:"phases"`
				Slowest string `json:"slowest"`
			} `json:"boot"`
		} `json:"fleets"`
	}
	getJSON(t, stack, "/api/admin/fleets", &fleets)
	boot := fleets.Fleets[0].Boot
	if boot == nil || boot.Workers != 2 || len(boot.Phases) < 2 ||
		boot.Phases[0].Name != "launch_to_agent" || boot.Phases[0].MaxS != bootDelay.Seconds() ||
		boot.Phases[1].Name != "pool_start_to_agent" || boot.Phases[1].MaxS != (bootDelay/4).Seconds() {
		t.Fatalf("boot timeline %+v: want both workers, from the pool start to the agent %s on the bridge, from the launch %s on Spot", boot, bootDelay/4, bootDelay)
	}

	// Both busy: the tick stops nothing and counts the bridge's job.
	r := tickDemo(t, stack)
	if len(r.Decision.Victims) != 0 || r.Ladder == nil || r.Ladder.Bridges != 1 || r.Ladder.BridgeLeased != 1 {
		t.Fatalf("victims %v, ladder %+v; %s", r.Decision.Victims, r.Ladder, r.Decision.Reason)
	}
	checkNothingBusyStopped()

	// The bridge's job ends: the next tick stops it back into the pool
	// while the Spot instance runs on.
	// The bridge's 60 seconds of sleep, begun a quarter of a boot in, are
	// over a minute from now, as long as the Spot instance's lease: the
	// heartbeats keep both leases while it passes.
	stepLeased(t, stack, clk, requests, "demo", time.Minute, func() int { return restWaits(stack, "demo") }, "t1:b-1", "t1:b-2")
	testenv.Eventually(t, "the bridge's job succeeded", requests, func() bool { return jobOf(stack, "t1:b-1").Status == job.Succeeded })
	r = tickDemo(t, stack)
	if !slices.ContainsFunc(r.Decision.Victims, func(v scaling.Victim) bool { return v.InstanceID == bridge && v.Why == scaling.WhyBridge }) ||
		!strings.Contains(r.Decision.Reason.String(), "stop 1 idle bridge into the pool") {
		t.Fatalf("victims %v; %s: want the idle bridge stopped into the pool", r.Decision.Victims, r.Decision.Reason)
	}
	if got := stack.Fleet.Pooled("demo"); !slices.Equal(got, []string{bridge}) {
		t.Fatalf("pool %v, want %s back in it", got, bridge)
	}
	if od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo"); od.Desired != 0 || len(od.Instances) != 0 {
		t.Fatalf("On-Demand group %+v after the bridge stopped", od)
	}
	if j := jobOf(stack, "t1:b-2"); j.Status != job.Leased {
		t.Fatalf("the Spot instance's job is %s", j.Status)
	}
	checkNothingBusyStopped()
	if st := stack.Fleet.Stats(); st.Started != 1 || st.Stopped != 1 {
		t.Fatalf("stats %+v: want one start from the pool and one stop into it", st)
	}
}
