package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
)

// Two agents must not share a worker id: while a registration is live, a
// registration with another agent key is refused and the first agent's
// token keeps working; the same agent restarting registers again; once the
// first registration has gone quiet, the id can be taken over.
func TestWorkerIDOfALiveAgentIsNotTakenOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.registerW1("tok-a", "key-a"); err != nil {
		t.Fatal(err)
	}
	err := e.registerW1("tok-b", "key-b")
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "another agent") {
		t.Fatalf("second agent's registration: %v, want a conflict naming another agent", err)
	}
	if err := e.registerW1("tok-c", ""); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("keyless registration over a live keyed one: %v, want a conflict", err)
	}
	if _, err := e.st.Authorize(e.ctx, store.WorkerAuth{WorkerID: "w1", Fleet: "gpu", TokenHash: "tok-a"}); err != nil {
		t.Fatalf("the first agent's token stopped working: %v", err)
	}
	// The same agent restarting.
	if err := e.registerW1("tok-a2", "key-a"); err != nil {
		t.Fatalf("the same agent could not register again: %v", err)
	}
	// Quiet past three heartbeats: the registration is no longer live.
	e.clock.Advance(2 * time.Minute)
	if err := e.registerW1("tok-b", "key-b"); err != nil {
		t.Fatalf("takeover of a quiet registration: %v", err)
	}
	if _, err := e.st.Authorize(e.ctx, store.WorkerAuth{WorkerID: "w1", Fleet: "gpu", TokenHash: "tok-b"}); err != nil {
		t.Fatalf("the new agent's token: %v", err)
	}
}

// Approval belongs to the agent an operator approved: a registration of an
// approved worker id by another agent key (a takeover once the first went
// quiet, or a registration without a key) needs approval again, while the
// approved agent restarting keeps it.
func TestApprovalSticksToTheAgentKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := func(tokenHash, agentKeyHash string) (bool, error) {
		w, err := e.st.RegisterWorker(e.ctx, store.Registration{WorkerID: "w1", Fleet: "other", Stage: "test",
			InstanceID: "i-1", MaxConcurrency: 1, TokenHash: tokenHash, AgentKeyHash: agentKeyHash})
		return w.Approved, err
	}
	if approved, err := reg("tok-a", "key-a"); err != nil || approved {
		t.Fatalf("first registration: approved %v, %v; want unapproved", approved, err)
	}
	if _, err := e.st.SetWorkerApproved(e.ctx, "w1", true); err != nil {
		t.Fatal(err)
	}
	if approved, err := reg("tok-a2", "key-a"); err != nil || !approved {
		t.Fatalf("the approved agent restarting: approved %v, %v; want approved", approved, err)
	}
	e.clock.Advance(10 * time.Minute) // quiet: the id may be taken over
	if approved, err := reg("tok-b", "key-b"); err != nil || approved {
		t.Fatalf("another agent's key took over the id: approved %v, %v; want unapproved", approved, err)
	}
	if w, _ := e.st.GetWorker(e.ctx, "w1"); w.Approved {
		t.Fatal("the stored worker is still approved after the takeover")
	}
	if _, err := e.st.SetWorkerApproved(e.ctx, "w1", true); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Minute)
	if approved, err := reg("tok-c", ""); err != nil || approved {
		t.Fatalf("a registration without a key: approved %v, %v; want unapproved", approved, err)
	}
}

// A worker that holds a lease is live however long ago it was last seen
// (its heartbeats write only its job): another agent cannot take its id
// over until the lease ends.
func TestWorkerIDHoldingALeaseIsNotTakenOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.registerW1("tok-a", "key-a"); err != nil {
		t.Fatal(err)
	}
	a := store.WorkerAuth{WorkerID: "w1", Fleet: "gpu", TokenHash: "tok-a"}
	e.submit("j", "wf-a", 0)
	j := e.lease(a)
	e.clock.Advance(100 * time.Second) // past three heartbeat intervals, within the lease
	if _, err := e.st.Heartbeat(e.ctx, a, j.ID, j.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.registerW1("tok-b", "key-b"); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "holds 1 leases") {
		t.Fatalf("takeover of a worker holding a lease: %v, want a conflict naming its leases", err)
	}
	if err := e.st.Complete(e.ctx, a, j.ID, j.LeaseToken, nil); err != nil {
		t.Fatalf("the first agent's completion: %v", err)
	}
	e.clock.Advance(2 * time.Minute)
	if err := e.registerW1("tok-b", "key-b"); err != nil {
		t.Fatalf("takeover once the lease ended and the worker went quiet: %v", err)
	}
}

// registerW1 registers worker w1 of fleet gpu on instance i-1 with a token
// and an agent key, as an agent restarting or a second agent would.
func (e *env) registerW1(tokenHash, agentKeyHash string) error {
	_, err := e.st.RegisterWorker(e.ctx, store.Registration{WorkerID: "w1", Fleet: "gpu", Stage: "test",
		InstanceID: "i-1", MaxConcurrency: 1, TokenHash: tokenHash, AgentKeyHash: agentKeyHash})
	return err
}
