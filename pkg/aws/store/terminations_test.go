package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
)

func TestWorkersByInstanceFindsEveryAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, id := range []string{"i-1-gpu1", "i-1-gpu0", "other"} {
		inst := "i-1"
		if id == "other" {
			inst = "i-2"
		}
		if _, err := e.st.RegisterWorker(e.ctx, store.Registration{WorkerID: id, Fleet: "gpu", Stage: "test",
			InstanceID: inst, MaxConcurrency: 1, TokenHash: "h-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := e.st.WorkersByInstance(e.ctx, "i-1")
	if err != nil || len(ws) != 2 || ws[0].ID != "i-1-gpu0" || ws[1].ID != "i-1-gpu1" {
		t.Fatalf("WorkersByInstance(i-1) = %+v, %v; want i-1-gpu0 and i-1-gpu1", ws, err)
	}
	// A worker re-registered from another instance leaves the old one.
	if _, err := e.st.RegisterWorker(e.ctx, store.Registration{WorkerID: "i-1-gpu1", Fleet: "gpu", Stage: "test",
		InstanceID: "i-3", MaxConcurrency: 1, TokenHash: "h2"}); err != nil {
		t.Fatal(err)
	}
	if ws, err := e.st.WorkersByInstance(e.ctx, "i-1"); err != nil || len(ws) != 1 || ws[0].ID != "i-1-gpu0" {
		t.Fatalf("after the move: %+v, %v", ws, err)
	}
	if ws, err := e.st.WorkersByInstance(e.ctx, "i-none"); err != nil || len(ws) != 0 {
		t.Fatalf("no workers: %+v, %v", ws, err)
	}
}

func TestTerminationLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := t0.Add(time.Minute)
	tm := store.Termination{InstanceID: "i-1", Fleet: "gpu", Group: "fleetq-test-gpu", Hook: "fleetq-drain", Token: "tok",
		StartedAt: start, Deadline: start.Add(10 * time.Minute), HeartbeatAt: start}
	got, created, err := e.st.StartTermination(e.ctx, tm)
	if err != nil || !created || got != tm {
		t.Fatalf("StartTermination = %+v, %v, %v; want %+v created", got, created, err, tm)
	}
	// Redelivered with a later time: the first deadline stands.
	later := tm
	later.StartedAt, later.Deadline = start.Add(time.Minute), start.Add(11*time.Minute)
	if got, created, err := e.st.StartTermination(e.ctx, later); err != nil || created || got != tm {
		t.Fatalf("second StartTermination = %+v, %v, %v; want the first kept", got, created, err)
	}
	other := tm
	other.InstanceID = "i-0"
	if _, _, err := e.st.StartTermination(e.ctx, other); err != nil {
		t.Fatal(err)
	}
	beat := start.Add(2 * time.Minute)
	if err := e.st.RecordTerminationHeartbeat(e.ctx, "i-1", beat); err != nil {
		t.Fatal(err)
	}
	list, err := e.st.Terminations(e.ctx)
	if err != nil || len(list) != 2 || list[0].InstanceID != "i-0" || list[1].InstanceID != "i-1" || !list[1].HeartbeatAt.Equal(beat) {
		t.Fatalf("Terminations = %+v, %v", list, err)
	}
	if err := e.st.EndTermination(e.ctx, "i-1"); err != nil {
		t.Fatal(err)
	}
	if err := e.st.EndTermination(e.ctx, "i-1"); err != nil {
		t.Fatalf("ending twice: %v", err)
	}
	if err := e.st.RecordTerminationHeartbeat(e.ctx, "i-1", beat); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("heartbeat of an ended termination: %v", err)
	}
	if list, err := e.st.Terminations(e.ctx); err != nil || len(list) != 1 || list[0].InstanceID != "i-0" {
		t.Fatalf("after the end: %+v, %v", list, err)
	}
	if _, _, err := e.st.StartTermination(e.ctx, store.Termination{InstanceID: "i-9"}); err == nil {
		t.Fatal("a termination without group, hook or deadline was started")
	}
}
