package devstack_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/interruption"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

const bootDelay = 20 * time.Second

// startLadderStack runs the dev stack with the demo fleet given an
// On-Demand rung (fallback_after 5m) and a preemption cap of 1, its local
// instances running the real agent; the scaler ticks only when the test
// says so. requests signals each time an agent's request returns.
func startLadderStack(t *testing.T) (stack *devstack.Stack, clk *clock.Fake, requests <-chan struct{}) {
	t.Helper()
	cfg := fleetconfig.Default()
	cfg.Fleets[0].OnDemand.FallbackAfter = fleetconfig.Duration(5 * time.Minute)
	cfg.Fleets[0].PreemptionCap = 1
	clk = clock.NewFake(time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC))
	stack, requests = startWatched(t, cfg, clk, devstack.FleetOptions{BootDelay: bootDelay, LocalAgents: true})
	return stack, clk, requests
}

func tickDemo(t *testing.T, s *devstack.Stack) scaler.FleetReport {
	t.Helper()
	reports, err := s.Scaler.Tick(context.Background())
	if err != nil || len(reports) != 1 {
		t.Fatalf("tick: %v (%d reports)", err, len(reports))
	}
	return reports[0]
}

func jobOf(s *devstack.Stack, id string) job.Job {
	j, err := s.Store.GetJob(context.Background(), id)
	if err != nil {
		return job.Job{}
	}
	return j
}

func onDemandInstance(id string) bool { return strings.Contains(id, "-od-") }

// Spot launches fail for lack of capacity: after fallback_after the scaler
// launches on the On-Demand group, whose agent (registered as on-demand)
// runs the job; Spot comes back and the idle On-Demand instance goes.
func TestDevStackFallsBackToOnDemandWhileSpotIsShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack, clk, requests := startLadderStack(t)
	stack.Fleet.SetSpotShort("demo", true)
	submit(t, stack, map[string]any{"job_id": "t1:short-1", "tenant_id": "t1", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 30}})
	testenv.Eventually(t, "the job dispatched", stack.Dispatched(), func() bool { return jobOf(stack, "t1:short-1").Status == job.Queued })
	shortAt := clk.Now()

	r := tickDemo(t, stack)
	for r.Ladder != nil && r.Ladder.Rung == scaling.RungSpot && clk.Now().Sub(shortAt) < 10*time.Minute {
		if od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo"); od.Desired != 0 {
			t.Fatalf("On-Demand desired %d at %s, before fallback_after", od.Desired, clk.Now().Sub(shortAt))
		}
		clk.Advance(time.Minute)
		r = tickDemo(t, stack)
	}
	if r.Ladder == nil || r.Ladder.Rung != scaling.RungOnDemand || !strings.Contains(r.Decision.Reason.String(), "on-demand rung") {
		t.Fatalf("ladder %+v, reason %q: want the On-Demand rung", r.Ladder, r.Decision.Reason)
	}
	if d := clk.Now().Sub(shortAt); d < 5*time.Minute {
		t.Fatalf("on the On-Demand rung after %s, before fallback_after 5m", d)
	}
	if od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo"); od.Desired != 1 {
		t.Fatalf("On-Demand desired %d, want 1", od.Desired)
	}

	clk.Advance(bootDelay)
	stack.Fleet.Step(ctx, 0)
	testenv.Eventually(t, "an On-Demand worker leased the job", requests, func() bool {
		j := jobOf(stack, "t1:short-1")
		return j.Status == job.Leased && onDemandInstance(j.WorkerID)
	})
	if w, err := stack.Store.GetWorker(ctx, jobOf(stack, "t1:short-1").WorkerID); err != nil || w.PurchaseOption != "on-demand" {
		t.Fatalf("the On-Demand instance's worker %+v, %v: want purchase_option on-demand", w, err)
	}
	// Its 30 seconds of sleep, once the agent waits for them.
	testenv.Waiters(t, clk, fleetWaits+pollWaits+jobWaits)
	clk.Advance(30 * time.Second)
	testenv.Eventually(t, "the job succeeded", requests, func() bool { return jobOf(stack, "t1:short-1").Status == job.Succeeded })

	// Spot is back: the idle On-Demand instance is terminated.
	stack.Fleet.SetSpotShort("demo", false)
	for range 5 {
		clk.Advance(time.Minute)
		stack.Fleet.Step(ctx, 0)
		r = tickDemo(t, stack)
		if od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo"); od.Desired == 0 && len(od.Instances) == 0 {
			if r.Ladder.Rung != scaling.RungSpot {
				t.Fatalf("rung %s once Spot is back", r.Ladder.Rung)
			}
			return
		}
	}
	od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo")
	t.Fatalf("On-Demand group %+v five minutes after Spot came back and the job ended; last reason %q", od, r.Decision.Reason)
}

// spotWarning delivers an EC2 Spot interruption warning for an instance
// through the stack's event route, as EventBridge would.
func spotWarning(t *testing.T, s *devstack.Stack, instanceID string, at time.Time) {
	t.Helper()
	ev := events.CloudWatchEvent{
		ID: fmt.Sprintf("spot-%s-%d", instanceID, at.UnixNano()), Source: "aws.ec2", DetailType: interruption.SpotWarning, Time: at,
		Detail: []byte(`{"instance-id":"` + instanceID + `","instance-action":"terminate"}`),
	}
	if _, err := s.DeliverEvent(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
}

// A job interrupted on Spot past the fleet's preemption cap (through the
// interruption function's path) is queued pinned to On-Demand: a Spot
// worker polling gets nothing, the scaler launches an On-Demand instance
// for it, and that instance's agent leases it.
func TestDevStackRunsAJobPreemptedToTheCapOnOnDemandOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack, clk, requests := startLadderStack(t)
	const id = "t1:pin-1"
	submit(t, stack, map[string]any{"job_id": id, "tenant_id": "t1", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 3600}})
	testenv.Eventually(t, "the job dispatched", stack.Dispatched(), func() bool { return jobOf(stack, id).Status == job.Queued })

	for round := 1; round <= 2; round++ { // preemption_cap 1: the second is past it
		tickDemo(t, stack)
		clk.Advance(bootDelay)
		stack.Fleet.Step(ctx, 0)
		testenv.Eventually(t, "a Spot worker leased the job", requests, func() bool { return jobOf(stack, id).Status == job.Leased })
		inst := jobOf(stack, id).WorkerID
		if onDemandInstance(inst) {
			t.Fatalf("round %d: leased by On-Demand %s before the cap", round, inst)
		}
		spotWarning(t, stack, inst, clk.Now())
		testenv.Eventually(t, "the interrupted job requeued", requests, func() bool {
			j := jobOf(stack, id)
			return j.Status == job.Queued && j.Preemptions == round
		})
		if err := stack.Fleet.Terminate(ctx, "demo", inst); err != nil { // EC2 reclaims it
			t.Fatal(err)
		}
	}
	j := jobOf(stack, id)
	if !j.OnDemandOnly || j.Reason != job.ReasonPreemptionCapOnDemand || j.Attempts != 0 {
		t.Fatalf("job past the cap: on_demand_only %v, reason %q, attempts %d", j.OnDemandOnly, j.Reason, j.Attempts)
	}
	var view wire.Job
	getJSON(t, stack, "/api/jobs/"+id, &view)
	if !view.OnDemandOnly || view.Status != "queued" {
		t.Fatalf("GET /api/jobs/%s: status %s, on_demand_only %v", id, view.Status, view.OnDemandOnly)
	}

	// A Spot worker polling gets nothing.
	spot := store.WorkerAuth{WorkerID: "spot-poller", Fleet: "demo", TokenHash: "h-spot-poller"}
	if _, err := stack.Store.RegisterWorker(ctx, store.Registration{WorkerID: spot.WorkerID, Fleet: "demo", Stage: stack.Config.Stage,
		InstanceID: "i-spot-poller", MaxConcurrency: 2, TokenHash: spot.TokenHash, PurchaseOption: "spot"}); err != nil {
		t.Fatal(err)
	}
	if got, err := stack.Store.LeaseNext(ctx, spot, []string{"demo-sleep"}); !errors.Is(err, store.ErrNoJob) {
		t.Fatalf("Spot worker's poll = %q, %v; want no job", got.ID, err)
	}

	r := tickDemo(t, stack)
	if od, _ := stack.Fleet.DescribeOnDemand(ctx, "demo"); od.Desired != 1 || !strings.Contains(r.Decision.Reason.String(), "1 jobs preempted to the cap keep 1 On-Demand") {
		t.Fatalf("On-Demand desired %d, reason %q", od.Desired, r.Decision.Reason)
	}
	clk.Advance(bootDelay)
	stack.Fleet.Step(ctx, 0)
	testenv.Eventually(t, "the On-Demand worker leased the pinned job", requests, func() bool {
		j := jobOf(stack, id)
		return j.Status == job.Leased && onDemandInstance(j.WorkerID)
	})
	if j := jobOf(stack, id); j.Attempts != 1 || j.Preemptions != 2 {
		t.Fatalf("pinned job on On-Demand: attempts %d, preemptions %d", j.Attempts, j.Preemptions)
	}
}
