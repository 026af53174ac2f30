package interruption_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// TestSpotWarningCostsAtMostOnePlusTwoNPlusLRequests holds the interruption's
// request budget of docs/data-model.md: a Spot warning for an instance with
// n workers holding L leases costs at most 1 + 2n + L DynamoDB requests
// (counted by the SDK middleware on the store's client), and still drains
// every worker, requeues every lease without an attempt and counts the
// event once.
func TestSpotWarningCostsAtMostOnePlusTwoNPlusLRequests(t *testing.T) {
	t.Parallel()
	for _, leases := range [][]int{{0}, {1}, {2}, {0, 0, 0}, {2, 0, 1}, {2, 2, 2, 2}} {
		t.Run(fmt.Sprint(leases), func(t *testing.T) {
			e := newBaseEnv(t, cfgYAML, clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)),
				clock.NewFake(time.Date(2026, 11, 22, 12, 34, 0, 0, time.UTC)), waitingHook)
			var jobs []string
			for i, k := range leases {
				a := e.register(fmt.Sprintf("w%d", i), instance, 2)
				for j := range k {
					id := fmt.Sprintf("j%d-%d", i, j)
					if _, _, err := e.sys.Store.CreateJob(e.ctx, job.Spec{ID: id, TenantID: "t", WorkflowID: "render", Input: json.RawMessage(`{}`)}); err != nil {
						t.Fatal(err)
					}
					if l, err := e.sys.Store.LeaseNext(e.ctx, a, []string{"render"}); err != nil || l.ID != id {
						t.Fatalf("lease %s: %+v, %v", id, l, err)
					}
					jobs = append(jobs, id)
				}
			}
			n, l := len(leases), len(jobs)
			before := e.requests.Load()
			ev := sample(t, "ec2-spot-interruption-warning.json")
			s := e.handle(ev)
			cost := e.requests.Load() - before
			if budget := int64(1 + 2*n + l); cost > budget {
				t.Errorf("%d workers with %d leases cost %d requests, budget 1 + 2n + L = %d", n, l, cost, budget)
			}
			if s.Requeued != l || len(s.Workers) != n || !s.Drained {
				t.Fatalf("summary %+v, want %d workers drained and %d requeued", s, n, l)
			}
			for _, id := range jobs {
				if j := e.job(id); j.Status != job.Queued || j.Attempts != 0 || j.Preemptions != 1 || j.Reason != job.SpotInterruption.Reason() {
					t.Fatalf("%s after the warning: %s attempts %d preemptions %d reason %q", id, j.Status, j.Attempts, j.Preemptions, j.Reason)
				}
			}
			for i := range leases {
				if w, err := e.sys.Store.GetWorker(e.ctx, fmt.Sprintf("w%d", i)); err != nil || w.Status != worker.Draining || w.Leases != 0 {
					t.Fatalf("worker %d: %+v, %v", i, w, err)
				}
			}
			counts, err := e.sys.Store.InterruptionCounts(e.ctx, "gpu", ev.Time.Add(-time.Hour))
			if err != nil || len(counts) != 1 || counts[0].Count != 1 || counts[0].Kind != fleetstate.InterruptSpot {
				t.Fatalf("interruption counts %+v, %v", counts, err)
			}
			// Delivered again: nothing moves and nothing is counted twice.
			if s := e.handle(ev); s.Requeued != 0 {
				t.Fatalf("redelivery requeued %d", s.Requeued)
			}
			if counts, _ := e.sys.Store.InterruptionCounts(e.ctx, "gpu", ev.Time.Add(-time.Hour)); len(counts) != 1 || counts[0].Count != 1 {
				t.Fatalf("redelivery counted again: %+v", counts)
			}
		})
	}
}

// TestPreemptionAtTheCapIsDecidedOnTheWholeJob: the index does not carry a
// job's preemption cap, so the requeue from the index candidate is refused
// for a job at its cap, which is then read and ends dead as the rule says.
func TestPreemptionAtTheCapIsDecidedOnTheWholeJob(t *testing.T) {
	t.Parallel()
	e := newBaseEnv(t, cfgYAML+"    preemption_cap: 1\n", clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)),
		clock.NewFake(time.Date(2026, 11, 22, 12, 34, 0, 0, time.UTC)), waitingHook)
	a := e.register("w1", instance, 1)
	if _, _, err := e.sys.Store.CreateJob(e.ctx, job.Spec{ID: "capped", TenantID: "t", WorkflowID: "render", Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		l, err := e.sys.Store.LeaseNext(e.ctx, a, []string{"render"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.sys.Store.RequeueWorkerLeases(e.ctx, "w1", job.SpotInterruption.Reason()); err != nil {
			t.Fatal(err)
		}
		if j := e.job(l.ID); j.Preemptions == 1 && j.Status != job.Queued {
			t.Fatalf("first preemption: %s", j.Status)
		}
	}
	j := e.job("capped")
	if j.Status != job.Dead || j.Preemptions != 2 || j.Error == nil || j.Error.Code != string(job.ReasonPreemptionCap) {
		t.Fatalf("past the cap: %s preemptions %d error %+v", j.Status, j.Preemptions, j.Error)
	}
	if w, err := e.sys.Store.GetWorker(e.ctx, "w1"); err != nil || w.Leases != 0 {
		t.Fatalf("worker %+v, %v", w, err)
	}
}
