package scaler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// countingStore counts the tick's reads of a fleet.
type countingStore struct {
	scaler.Store
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingStore) count(name string) {
	c.mu.Lock()
	c.calls[name]++
	c.mu.Unlock()
}

func (c *countingStore) ListWorkers(ctx context.Context, fleet string) ([]worker.Worker, error) {
	c.count("ListWorkers")
	return c.Store.ListWorkers(ctx, fleet)
}

func (c *countingStore) GetFleetState(ctx context.Context, fleet string) (fleetstate.State, error) {
	c.count("GetFleetState")
	return c.Store.GetFleetState(ctx, fleet)
}

func (c *countingStore) FleetSnapshot(ctx context.Context, fleet string) (fleetstate.Snapshot, error) {
	c.count("FleetSnapshot")
	return c.Store.FleetSnapshot(ctx, fleet)
}

// One tick reads the fleet's workers, state and backlog once each, however
// many steps use them.
func TestTickReadsOneSnapshotPerFleet(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.submit(3, "j")
	h.tick()
	h.advance(4 * time.Minute) // booted and registered
	h.leaseAll()
	counted := &countingStore{Store: h.sys.Store, calls: map[string]int{}}
	sc := h.scalerOn(counted)
	if _, err := sc.Tick(h.ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ListWorkers", "GetFleetState", "FleetSnapshot"} {
		if counted.calls[name] != 1 {
			t.Errorf("%s called %d times in one tick, want 1 (%v)", name, counted.calls[name], counted.calls)
		}
	}
}

// A worker unseen for StaleWorkerAfter is removed by the tick, and the
// decision is made without it.
func TestTickRemovesStaleWorkersFromItsSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := worker.Auth{WorkerID: "w-gone", Fleet: "gpu", TokenHash: "hash-gone"}
	if _, err := h.sys.Store.RegisterWorker(h.ctx, worker.Registration{WorkerID: a.WorkerID, Fleet: "gpu", Stage: "test",
		InstanceID: "i-gone", MaxConcurrency: 2, TokenHash: a.TokenHash}); err != nil {
		t.Fatal(err)
	}
	h.advance(scaler.StaleWorkerAfter + time.Minute)
	r := h.tick()
	if r.Removed != 1 {
		t.Fatalf("removed %d stale workers, want 1", r.Removed)
	}
	if ws, err := h.sys.Store.ListWorkers(h.ctx, "gpu"); err != nil || len(ws) != 0 {
		t.Fatalf("workers after the tick: %v, %v", ws, err)
	}
	if r.Decision.Counts.Idle != 0 || r.Decision.Counts.Draining != 0 {
		t.Fatalf("the decision counted the removed worker: %+v", r.Decision.Counts)
	}
}

// A wake that lands while a tick runs stays in the fleet's history, under
// the tick's decision.
func TestTickKeepsAWakeThatLandsDuringIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.tick() // "no work" recorded
	h.submit(2, "j")
	woke := false
	sc := h.scalerOn(&wakeDuring{Store: h.sys.Store, wake: func() {
		if !woke {
			woke = true
			if _, err := h.sys.Store.WakeFleet(h.ctx, "gpu", 2, 1, scaling.WakeReason(2)); err != nil {
				t.Error(err)
			}
		}
	}})
	if _, err := sc.Tick(h.ctx); err != nil {
		t.Fatal(err)
	}
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, d := range st.History {
		reasons = append(reasons, d.Reason.String())
	}
	if len(reasons) < 2 || reasons[1] != "woken by 2 ready jobs" {
		t.Fatalf("history %q: the wake during the tick is lost", reasons)
	}
	if st.LastDecision == nil || st.LastDecision.Reason.String() != reasons[0] || st.LastDecision.Reason.String() == reasons[1] {
		t.Fatalf("last decision %+v, history %q", st.LastDecision, reasons)
	}
}

// wakeDuring runs wake just before the tick records its decision.
type wakeDuring struct {
	scaler.Store
	wake func()
}

func (w *wakeDuring) RecordDecision(ctx context.Context, fleet string, r fleetstate.Record, prev fleetstate.State) error {
	w.wake()
	return w.Store.RecordDecision(ctx, fleet, r, prev)
}

// A scale-in victim that leased a job between the decision and the drain
// is kept: not drained, not terminated, and the group keeps its instance.
func TestApplyKeepsAVictimThatTookWork(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.submit(2, "j")
	h.tick()
	h.advance(4 * time.Minute)
	leases := h.leaseAll()
	for id, l := range leases {
		if err := h.sys.Store.Complete(h.ctx, l.a, id, l.token, nil); err != nil {
			t.Fatal(err)
		}
	}
	h.advance(16 * time.Minute) // past the idle window and the grace
	h.submit(1, "late")
	sc := h.scalerOn(&leaseBeforeDrain{Store: h.sys.Store, lease: func(id string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, a := range h.workers {
			if a.WorkerID == id {
				if _, err := h.sys.Store.LeaseNext(h.ctx, a, []string{"render"}); err != nil {
					t.Errorf("lease by the victim: %v", err)
				}
			}
		}
	}})
	reports, err := sc.Tick(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := reports[0]
	if len(r.Kept) == 0 {
		t.Fatalf("no victim kept: victims %+v, terminated %v", r.Decision.Victims, r.Terminated)
	}
	g, err := h.fleet.Describe(h.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range r.Kept {
		found := false
		for _, in := range g.Instances {
			found = found || in.ID == id
		}
		if !found {
			t.Fatalf("kept victim %s was terminated: group %+v", id, g)
		}
	}
	if r.Desired != r.Decision.Desired+len(r.Kept) {
		t.Fatalf("desired %d, want the decision's %d plus %d kept", r.Desired, r.Decision.Desired, len(r.Kept))
	}
}

// leaseBeforeDrain has the victim lease a job just before the tick drains it.
type leaseBeforeDrain struct {
	scaler.Store
	lease func(workerID string)
}

func (l *leaseBeforeDrain) DrainIdleWorker(ctx context.Context, id string) error {
	l.lease(id)
	err := l.Store.DrainIdleWorker(ctx, id)
	if err == nil {
		return fmt.Errorf("victim %s drained after it took work", id)
	}
	return err
}

// A heartbeat writes only its job, so a busy worker's last_seen_ms stays
// at its claim: a worker that holds a live lease counts as seen. Heartbeats
// alone keep it busy, never unresponsive or stale, for longer than
// StaleWorkerAfter; once they stop, its lease runs out and the worker,
// unseen since its claim, is removed.
func TestAWorkerHoldingALiveLeaseIsSeen(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	long := job.Spec{ID: "long", TenantID: "t", WorkflowID: "render", Input: json.RawMessage(`{}`), TimeoutSeconds: 4 * 3600}
	if _, _, err := h.sys.Store.CreateJob(h.ctx, long); err != nil {
		t.Fatal(err)
	}
	h.tick()
	h.advance(4 * time.Minute) // booted and registered
	leases := h.leaseAll()
	if len(leases) != 1 {
		t.Fatalf("leased %d jobs, want 1", len(leases))
	}
	for elapsed := time.Duration(0); elapsed <= scaler.StaleWorkerAfter; elapsed += 5 * time.Minute {
		h.advance(5 * time.Minute)
		h.heartbeat(leases)
		r := h.tick()
		if r.Removed != 0 || r.Decision.Counts.Unresponsive != 0 || r.Decision.Counts.Busy != 1 {
			t.Fatalf("after %s of heartbeats: removed %d, counts %+v; want the worker busy", elapsed, r.Removed, r.Decision.Counts)
		}
	}
	h.advance(11 * time.Minute) // no heartbeat: the 600 s lease runs out
	r := h.tick()
	if r.Swept.Leases.Requeued != 1 || r.Removed != 1 || r.Decision.Counts.Busy != 0 {
		t.Fatalf("after the heartbeats stopped: swept %+v, removed %d, counts %+v; want the lease ended and the worker, unseen since its claim, removed",
			r.Swept, r.Removed, r.Decision.Counts)
	}
}
