package devstack_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// A burst of jobs submitted to a fleet at zero, which has run before (it
// keeps its boots and run times): every job has an estimate at submit, at
// least 80% of them (the goal, docs/scaling.md) are within max(60 s, 20%
// of the actual wait) of when the job was actually leased, and none is off
// by more than twice that.
//
// Each one within the tolerance is not held: over 20 runs 155 of 160
// estimates were, and 5 runs had one estimate off by 65 to 90 s. The
// projection leases the queue in its order, the stack's pollers take the
// head of the queue in a shuffled order (the lease planner's spread), so
// the starts are right as a set and a job of the burst may take another's.
func TestDevStackEstimatesABurstOnAnEmptyFleet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := fleetconfig.Default()
	f := &cfg.Fleets[0]
	f.SlotsPerInstance, f.MaxInstances = 1, 4
	f.IdleWindow, f.ScaleInGrace = fleetconfig.Duration(2*time.Minute), fleetconfig.Duration(time.Minute)
	clk := clock.NewFake(time.Date(2026, 3, 5, 9, 0, 0, 0, time.UTC))
	stack, requests := startWatched(t, cfg, clk, devstack.FleetOptions{BootDelay: bootDelay, LocalAgents: true})
	const run = 30 * time.Second
	sleep := map[string]any{"seconds": int(run / time.Second)}

	// The clock moves 5 s at a time once the agents are at rest; the
	// scaler ticks each minute.
	nextTick := clk.Now()
	step := func() {
		t.Helper()
		atRest(t, clk, requests, func() int { return restWaits(stack, "demo") })
		if !clk.Now().Before(nextTick) {
			tickDemo(t, stack)
			nextTick = nextTick.Add(time.Minute)
		}
		clk.Advance(5 * time.Second)
		stack.Fleet.Step(ctx, 0)
	}
	until := func(what string, done func() bool) {
		t.Helper()
		for start := clk.Now(); !done(); step() {
			if clk.Now().Sub(start) > time.Hour {
				t.Fatalf("%s: not within an hour", what)
			}
		}
	}

	// Its history: one job, then back to zero.
	submit(t, stack, map[string]any{"job_id": "before", "tenant_id": "t1", "workflow_id": "demo-sleep", "input": sleep})
	until("the first job succeeded", func() bool { return jobOf(stack, "t1:before").Status == job.Succeeded })
	until("the fleet back at zero", func() bool {
		g, err := stack.Fleet.Describe(ctx, "demo")
		ws, _ := stack.Store.ListWorkers(ctx, "demo")
		return err == nil && g.Desired == 0 && len(g.Instances) == 0 && len(ws) == 0
	})

	// The burst: twice what the fleet's max runs at once.
	const burst = 8
	submitted := clk.Now()
	var ids []string
	for i := range burst {
		id := fmt.Sprintf("burst-%d", i)
		submit(t, stack, map[string]any{"job_id": id, "tenant_id": "t1", "workflow_id": "demo-sleep", "input": sleep})
		ids = append(ids, "t1:"+id)
	}
	testenv.Eventually(t, "the burst dispatched", stack.Dispatched(), func() bool {
		for _, id := range ids {
			if jobOf(stack, id).Status == job.Accepted {
				return false
			}
		}
		return true
	})
	estimates := map[string]wire.Job{}
	for _, id := range ids {
		var j wire.Job
		getJSON(t, stack, "/api/jobs/"+id, &j)
		estimates[id] = j
	}
	until("the burst succeeded", func() bool {
		for _, id := range ids {
			if jobOf(stack, id).Status != job.Succeeded {
				return false
			}
		}
		return true
	})

	met, known := 0, 0
	for _, id := range ids {
		e := estimates[id]
		leased := firstLease(jobOf(stack, id))
		wait := leased.Sub(submitted)
		tolerance := max(time.Minute, wait/5)
		if e.EstimatedStartAt == nil {
			t.Errorf("%s: no estimate at submit (%s, waiting on %+v); leased after %s", id, e.EstimateBasis, e.WaitingOn, wait)
			continue
		}
		at, err := time.Parse(time.RFC3339, *e.EstimatedStartAt)
		if err != nil {
			t.Fatal(err)
		}
		known++
		miss := at.Sub(leased).Abs()
		t.Logf("%s: place %d, estimated after %s (%s: %s), leased after %s, off by %s", id, e.Position, at.Sub(submitted), e.WaitingOn.Code, e.WaitingOn.Text, wait, miss)
		switch {
		case miss > 2*tolerance:
			t.Errorf("%s: estimated at %s, leased at %s: off by %s, more than twice %s", id, at, leased, miss, tolerance)
		case miss > tolerance:
			t.Logf("%s: off by more than %s", id, tolerance)
		default:
			met++
		}
	}
	t.Logf("%d of %d estimates at submit within max(60 s, 20%% of the wait)", met, burst)
	if known == burst && met*5 < burst*4 {
		t.Errorf("%d of %d estimates within max(60 s, 20%% of the wait), fewer than 80%%", met, burst)
	}
}

// firstLease is when the job was first leased (zero: never).
func firstLease(j job.Job) time.Time {
	for _, h := range j.History {
		if h.To == job.Leased {
			return h.At
		}
	}
	return time.Time{}
}
