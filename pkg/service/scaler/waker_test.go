package scaler_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// countingCapacity counts the SetDesired calls reaching a real capacity.
type countingCapacity struct {
	scaler.Capacity
	sets atomic.Int32
}

func (c *countingCapacity) SetDesired(ctx context.Context, fleet string, n int) error {
	c.sets.Add(1)
	return c.Capacity.SetDesired(ctx, fleet, n)
}

// Concurrent dispatch invocations with work for a fleet at zero raise it
// once, to what the winner's jobs need, and never lower it afterwards.
func TestConcurrentWakesRaiseOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := &countingCapacity{Capacity: h.fleet}
	w, err := scaler.NewWaker(h.sys.Store.Config(), h.sys.Store, c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Wake(h.ctx, "gpu", 3); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := c.sets.Load(); n != 1 {
		t.Fatalf("%d SetDesired calls, want 1", n)
	}
	if g, _ := h.fleet.Describe(h.ctx, "gpu"); g.Desired != 2 {
		t.Fatalf("desired %d, want 2 (3 jobs, 2 slots each)", g.Desired)
	}
	// The scaler grew the group meanwhile and the state still reads zero:
	// a wake must not lower it.
	if err := h.fleet.SetDesired(h.ctx, "gpu", 5); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sc.Tick(h.ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Wake(h.ctx, "gpu", 1); err != nil {
		t.Fatal(err)
	}
	if g, _ := h.fleet.Describe(h.ctx, "gpu"); g.Desired < 2 {
		t.Fatalf("desired lowered to %d", g.Desired)
	}
}

// A wake is a scaling decision like a tick's: the fleet's state says why it
// left zero, as its last decision and in its history.
func TestWakeRecordsWhyTheFleetWoke(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if err := h.waker.Wake(h.ctx, "gpu", 6); err != nil {
		t.Fatal(err)
	}
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	d := st.LastDecision
	if d == nil || d.Reason.String() != "woken by 6 ready jobs" || d.Reason.Code() != scaling.ReasonWake || d.Desired != 3 || d.Inputs.Map()["ready"] != 6 || d.Inputs.Map()["desired_after"] != 3 {
		t.Fatalf("last decision after a wake: %+v", d)
	}
	if len(st.History) != 1 || st.History[0].Reason != d.Reason {
		t.Fatalf("history after a wake: %+v", st.History)
	}
	if g, _ := h.fleet.Describe(h.ctx, "gpu"); g.Desired != 3 {
		t.Fatalf("group desired %d, want 3 (6 jobs, 2 slots each)", g.Desired)
	}
}
