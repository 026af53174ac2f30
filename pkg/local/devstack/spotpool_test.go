package devstack_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// An empty fleet with a stopped Spot pool of three and a bridge of one:
// the first job is leased by a pool instance started on enqueue (no Spot
// launch, no bridge), which runs the real agent under its instance id and
// registers through attestation as the pool's; once idle it is stopped
// back into the pool. The next job's pool start fails for want of Spot
// capacity, and so do its retries on the other pairs: each pair is
// avoided, and that job alone goes to On-Demand — one bridge instance,
// which leases it.
func TestDevStackStartsAStoppedSpotPoolInstanceForAColdStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := fleetconfig.Default()
	f := &cfg.Fleets[0]
	f.SlotsPerInstance = 1
	f.Bridge = fleetconfig.Bridge{Pool: 1}
	pairs := []fleetconfig.SpotPoolPair{{InstanceType: "g5.xlarge", Zone: "us-east-1a"}, {InstanceType: "g5.xlarge", Zone: "us-east-1b"}, {InstanceType: "g4dn.xlarge", Zone: "us-east-1a"}}
	f.SpotPool = fleetconfig.SpotPool{Size: 3, Pairs: pairs, VolumeGB: 60, MaxAgeHours: 168, AvoidMinutes: 15}
	clk := clock.NewFake(time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC))
	stack, requests := startWatched(t, cfg, clk, devstack.FleetOptions{BootDelay: bootDelay, PoolStart: 0.25, LocalAgents: true})
	checkNothingBusyStopped := func() {
		t.Helper()
		if st := stack.Fleet.Stats(); st.StoppedBusy != 0 || st.KilledBusy != 0 {
			t.Fatalf("stopped %d and killed %d busy instances", st.StoppedBusy, st.KilledBusy)
		}
	}
	poolState := func(id string) scaling.PoolState {
		p, _, _ := stack.Store.PoolInstanceOf(ctx, "demo", id)
		return p.State
	}

	// The ticks fill the pool: three launched, prepared, stopped.
	for range 3 {
		tickDemo(t, stack)
	}
	recs, _, err := stack.Store.ReadPool(ctx, "demo")
	if err != nil || len(recs) != 3 || slices.ContainsFunc(recs, func(p scaling.PoolInstance) bool { return p.State != scaling.PoolStopped }) {
		t.Fatalf("pool %+v, %v: want three stopped", recs, err)
	}

	// The first job starts one pool instance on enqueue, and nothing else.
	submit(t, stack, map[string]any{"job_id": "p-1", "tenant_id": "t1", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 30}})
	testenv.Eventually(t, "the wake started a pool instance", stack.Dispatched(), func() bool { return stack.Fleet.Stats().PoolStarted == 1 })
	spot, _ := stack.Fleet.Describe(ctx, "demo")
	od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo")
	if spot.Desired != 0 || od.Desired != 0 {
		t.Fatalf("Spot group %+v, On-Demand %+v: the pool takes the job", spot, od)
	}
	var started string
	recs, _, _ = stack.Store.ReadPool(ctx, "demo")
	for _, p := range recs {
		if p.State == scaling.PoolStarting {
			started = p.ID
		}
	}
	st, _ := stack.Store.GetFleetState(ctx, "demo")
	if started == "" || len(st.History) == 0 || st.History[0].Reason.Code() != scaling.ReasonPoolStart || !strings.Contains(st.History[0].Reason.String(), started) {
		t.Fatalf("pool %+v, history %+v: want the start recorded", recs, st.History)
	}
	clk.Advance(bootDelay / 4)
	stack.Fleet.Step(ctx, 0)
	testenv.Eventually(t, "the pool instance leased the job", requests, func() bool {
		j := jobOf(stack, "t1:p-1")
		return j.Status == job.Leased && j.WorkerID == started
	})
	if w, err := stack.Store.GetWorker(ctx, started); err != nil || w.InstanceID != started || w.PurchaseOption != "spot" {
		t.Fatalf("the pool instance's worker %+v, %v", w, err)
	}
	// Its boot's first phase runs from the pool's start (a quarter of the
	// boot delay on the dev stack) to its agent, named apart from a
	// bridge's start from the On-Demand warm pool and from a launch.
	var fleets struct {
		Fleets []struct {
			Boot *struct {
				Workers int `json:"workers"`
				Phases  []struct {
					Name string  `json:"name"`
					MaxS float64 `json:"max_s"`
				} `json:"phases"`
			} `json:"boot"`
		} `json:"fleets"`
	}
	getJSON(t, stack, "/api/admin/fleets", &fleets)
	if boot := fleets.Fleets[0].Boot; boot == nil || boot.Workers != 1 || len(boot.Phases) == 0 ||
		boot.Phases[0].Name != "spot_pool_start_to_agent" || boot.Phases[0].MaxS != (bootDelay/4).Seconds() {
		t.Fatalf("boot timeline %+v: want the pool instance's spot_pool_start_to_agent, %s", boot, bootDelay/4)
	}
	r := tickDemo(t, stack)
	if r.Pool == nil || len(r.Pool.Stopped) != 0 || poolState(started) != scaling.PoolRunning || r.Desired != 0 {
		t.Fatalf("busy pool instance: %+v, %s, desired %d (%s)", r.Pool, poolState(started), r.Desired, r.Reason)
	}
	checkNothingBusyStopped()

	// The job's 30 seconds pass; idle past the grace, the pool instance is
	// stopped back into the pool.
	stepLeased(t, stack, clk, requests, "demo", 30*time.Second, func() int { return restWaits(stack, "demo") }, "t1:p-1")
	testenv.Eventually(t, "the job succeeded", requests, func() bool { return jobOf(stack, "t1:p-1").Status == job.Succeeded })
	for range 3 { // past the 2m grace, the agent polling
		atRest(t, clk, requests, func() int { return restWaits(stack, "demo") })
		clk.Advance(time.Minute)
		seen := clk.Now().Add(-10 * time.Second)
		testenv.Eventually(t, "the idle agent polled", requests, func() bool {
			w, err := stack.Store.GetWorker(ctx, started)
			return err == nil && !w.LastSeenAt.Before(seen)
		})
	}
	r = tickDemo(t, stack)
	if r.Pool == nil || !slices.Equal(r.Pool.Stopped, []string{started}) || !strings.Contains(r.Reason.String(), "pool: stop 1") {
		t.Fatalf("idle pool instance: %+v (%s)", r.Pool, r.Reason)
	}
	tickDemo(t, stack)
	if poolState(started) != scaling.PoolStopped || stack.Fleet.Stats().PoolStopped != 1 {
		t.Fatalf("%s is %s, stats %+v: want it stopped back into the pool", started, poolState(started), stack.Fleet.Stats())
	}
	checkNothingBusyStopped()

	// No Spot capacity on any pair: the next job's pool start fails, its
	// pair is avoided, the start on each other pair's stopped instance
	// fails too, and one bridge from On-Demand takes that job.
	for _, p := range pairs {
		stack.Fleet.SetPoolShort(scaling.Pair{InstanceType: p.InstanceType, Zone: p.Zone}, true)
	}
	bridge := stack.Fleet.Pooled("demo")
	submit(t, stack, map[string]any{"job_id": "p-2", "tenant_id": "t1", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 30}})
	testenv.Eventually(t, "the failed start went to On-Demand", stack.Dispatched(), func() bool {
		od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo")
		return stack.Fleet.Stats().PoolFailed == len(pairs) && od.Desired == 1
	})
	if s := stack.Fleet.Stats(); s.PoolStarted != 1 {
		t.Fatalf("stats %+v: failed starts only", s)
	}
	_, avoided, _ := stack.Store.ReadPool(ctx, "demo")
	st, _ = stack.Store.GetFleetState(ctx, "demo")
	if len(avoided) != len(pairs) || !slices.ContainsFunc(st.History, func(d fleetstate.Decision) bool {
		return d.Reason.Code() == scaling.ReasonPoolFallback && strings.Contains(d.Reason.String(), "1 jobs to On-Demand")
	}) {
		t.Fatalf("avoided %v, history %+v: want every pair avoided and the fallback recorded", avoided, st.History)
	}
	clk.Advance(bootDelay / 4)
	stack.Fleet.Step(ctx, 0)
	testenv.Eventually(t, "the bridge leased the job", requests, func() bool {
		j := jobOf(stack, "t1:p-2")
		return j.Status == job.Leased && len(bridge) == 1 && j.WorkerID == bridge[0]
	})
	if od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo"); od.Desired != 1 || len(od.Instances) != 1 {
		t.Fatalf("On-Demand group %+v: one instance for the one job", od)
	}
	checkNothingBusyStopped()
}
