package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

func TestCallbackIsFiledOnceDueAndRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const url = "https://hooks.example.com/in"
	if _, _, err := e.st.CreateJob(e.ctx, job.Spec{ID: "hooked", TenantID: "t1", WorkflowID: "wf-a", Input: json.RawMessage(`{}`), CallbackURL: url}); err != nil {
		t.Fatal(err)
	}
	e.submit("plain", "wf-a", 0)
	for _, id := range []string{"hooked", "plain"} {
		if _, err := e.st.Cancel(e.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if j := e.job("hooked"); j.CallbackURL != url || j.Callback != nil {
		t.Fatalf("before the relay: url %q, callback %+v", j.CallbackURL, j.Callback)
	}
	rec := &recorder{}
	if _, err := e.st.RelayOutbox(e.ctx, rec, 10); err != nil {
		t.Fatal(err)
	}
	due, err := e.st.DueCallbacks(e.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].JobID != "hooked" || due[0].URL != url || due[0].Event.DetailType != store.EventCanceled || due[0].Attempts != 0 {
		t.Fatalf("due = %+v, want the hooked job's cancel only", due)
	}
	if j := e.job("hooked"); j.Callback == nil || j.Callback.State != job.CallbackPending || j.Callback.EventID != due[0].Event.ID {
		t.Fatalf("filed: callback %+v", j.Callback)
	}

	// A failed attempt waits until its next time.
	next := t0.Add(time.Minute)
	if err := e.st.RecordCallback(e.ctx, due[0], store.CallbackResult{Err: "the receiver answered 500", NextAt: next}); err != nil {
		t.Fatal(err)
	}
	if d, _ := e.st.DueCallbacks(e.ctx, 10); len(d) != 0 {
		t.Fatalf("due before its retry time: %+v", d)
	}
	j := e.job("hooked")
	if j.Callback.State != job.CallbackPending || j.Callback.Attempts != 1 || j.Callback.LastError != "the receiver answered 500" || !j.Callback.NextAttemptAt.Equal(next) {
		t.Fatalf("after a failure: %+v", j.Callback)
	}
	e.clock.Advance(time.Minute)
	due, _ = e.st.DueCallbacks(e.ctx, 10)
	if len(due) != 1 || due[0].Attempts != 1 {
		t.Fatalf("due at its retry time: %+v", due)
	}
	if err := e.st.RecordCallback(e.ctx, due[0], store.CallbackResult{Delivered: true}); err != nil {
		t.Fatal(err)
	}
	j = e.job("hooked")
	if j.Callback.State != job.CallbackDelivered || j.Callback.Attempts != 2 || !j.Callback.DeliveredAt.Equal(e.clock.Now()) || j.Callback.LastError != "" {
		t.Fatalf("after delivery: %+v", j.Callback)
	}
	if d, _ := e.st.DueCallbacks(e.ctx, 10); len(d) != 0 {
		t.Fatalf("due after delivery: %+v", d)
	}
	// Relaying again (the outbox is empty) files nothing new.
	if _, err := e.st.RelayOutbox(e.ctx, rec, 10); err != nil {
		t.Fatal(err)
	}
	if d, _ := e.st.DueCallbacks(e.ctx, 10); len(d) != 0 {
		t.Fatalf("due after a second relay: %+v", d)
	}
}

func TestCallbackGivenUpIsFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, _, err := e.st.CreateJob(e.ctx, job.Spec{ID: "h", TenantID: "t1", WorkflowID: "wf-a", Input: json.RawMessage(`{}`), CallbackURL: "https://x.example.com/"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Cancel(e.ctx, "h"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.RelayJob(e.ctx, &recorder{}, "h"); err != nil {
		t.Fatal(err)
	}
	due, _ := e.st.DueCallbacks(e.ctx, 10)
	if len(due) != 1 {
		t.Fatalf("due = %+v", due)
	}
	if err := e.st.RecordCallback(e.ctx, due[0], store.CallbackResult{Err: "timeout"}); err != nil {
		t.Fatal(err)
	}
	j := e.job("h")
	if j.Callback.State != job.CallbackFailed || j.Callback.Attempts != 1 || j.Callback.LastError != "timeout" || j.Callback.FailedAt.IsZero() {
		t.Fatalf("given up: %+v", j.Callback)
	}
	if d, _ := e.st.DueCallbacks(e.ctx, 10); len(d) != 0 {
		t.Fatalf("due after giving up: %+v", d)
	}
}
