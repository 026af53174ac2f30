package scaler_test

import (
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// With no capacity attached (the dev stack with --no-local-fleet, or any
// stage whose workers are started by hand), the fleet is its registered
// workers: the advisory decision counts each machine a worker registered
// from as in service, busy while its worker holds a lease, idle otherwise,
// and sizes from there instead of from nothing.
func TestAdvisoryDecisionCountsHandStartedWorkers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.configure(func(c *scaler.Config) { c.Capacity = nil })
	for _, m := range []string{"laptop", "desk"} {
		a := worker.Auth{WorkerID: m, Fleet: "gpu", TokenHash: "hash-" + m}
		if _, err := h.sys.Store.RegisterWorker(h.ctx, worker.Registration{WorkerID: m, Fleet: "gpu", Stage: "test",
			InstanceID: m, MaxConcurrency: 2, TokenHash: a.TokenHash}); err != nil {
			t.Fatal(err)
		}
		h.workers[m] = a
	}
	h.submit(1, "j")
	leases := map[string]bool{}
	for _, l := range h.leaseAll() {
		leases[l.a.WorkerID] = true
	}
	if len(leases) != 1 {
		t.Fatalf("one worker should hold the one job, got %v", leases)
	}
	r := h.tick()
	if !strings.HasPrefix(r.Reason.String(), "advisory, no capacity attached: ") || !strings.Contains(r.Reason.String(), "have 1 busy, 1 idle, 0 booting") {
		t.Errorf("reason %q: want the advisory decision to count the hand-started workers, 1 busy and 1 idle", r.Reason)
	}
	if got := r.Group.InService(); got != 2 {
		t.Errorf("the tick reports %d machines in service, want the 2 the workers registered from", got)
	}
	if r.Desired != 2 {
		t.Errorf("desired %d: the idle worker is within its scale-in grace, so both machines stay", r.Desired)
	}
}
