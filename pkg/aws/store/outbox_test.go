package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

// recorder is a Publisher that keeps what it was given and can be told to
// refuse calls.
type recorder struct {
	mu     sync.Mutex
	events []store.JobEvent
	fail   func() bool
}

var errPublish = errors.New("event bus unavailable")

func (r *recorder) Publish(_ context.Context, evs []store.JobEvent) error {
	if r.fail != nil && r.fail() {
		return errPublish
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, evs...)
	return nil
}

// byID checks that no id was ever published as two different events and
// returns one event per id.
func (r *recorder) byID(t *testing.T) map[string]store.JobEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]store.JobEvent{}
	for _, e := range r.events {
		if prev, ok := out[e.ID]; ok && (prev.DetailType != e.DetailType || prev.Detail.Status != e.Detail.Status || prev.Detail.Attempts != e.Detail.Attempts) {
			t.Fatalf("event %s published as %s/%s and as %s/%s", e.ID, prev.DetailType, prev.Detail.Status, e.DetailType, e.Detail.Status)
		}
		out[e.ID] = e
	}
	return out
}

// ofJob returns the n-th distinct event of a job, in the order published.
func (r *recorder) ofJob(t *testing.T, jobID string, n int) store.JobEvent {
	t.Helper()
	byID := r.byID(t)
	seen := map[string]bool{}
	var order []store.JobEvent
	r.mu.Lock()
	for _, e := range r.events {
		if e.Detail.JobID == jobID && !seen[e.ID] {
			seen[e.ID] = true
			order = append(order, byID[e.ID])
		}
	}
	r.mu.Unlock()
	if n >= len(order) {
		t.Fatalf("job %s has %d events, wanted event %d", jobID, len(order), n)
	}
	return order[n]
}

func TestOutboxAnnouncesRetriesAndOneOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{}
	e.submit("j", "wf-a", 0)
	a := e.register("w1", "gpu", 1)

	l := e.lease(a)
	if _, err := e.st.Fail(e.ctx, a, "j", l.LeaseToken, job.Error{Code: "oom", Message: "out of memory", Retryable: true}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)
	l = e.lease(a)
	if _, err := e.st.Requeue(e.ctx, a, "j", l.LeaseToken, job.SpotInterruption); err != nil {
		t.Fatal(err)
	}
	l = e.lease(a)
	e.clock.Advance(90 * time.Second)
	if err := e.st.Complete(e.ctx, a, "j", l.LeaseToken, json.RawMessage(`{"frames":24}`)); err != nil {
		t.Fatal(err)
	}

	n, err := e.st.RelayOutbox(e.ctx, rec, 10)
	if err != nil || n != 2 {
		t.Fatalf("relay sent %d events, %v; want a retry and the outcome", n, err)
	}
	failed, done := rec.ofJob(t, "j", 0), rec.ofJob(t, "j", 1)
	if failed.DetailType != store.EventFailed || failed.Detail.Attempts != 1 || failed.Detail.Error == nil || failed.Detail.Error.Code != "oom" {
		t.Fatalf("first event %+v, want Job Failed after attempt 1 with the error", failed)
	}
	if done.DetailType != store.EventSucceeded || string(done.Detail.Result) != `{"frames":24}` {
		t.Fatalf("second event %+v, want Job Succeeded with the result", done)
	}
	if done.Detail.Attempts != 2 || done.Detail.Preemptions != 1 {
		t.Fatalf("outcome counts attempts %d preemptions %d, want 2 and 1 (the preemption gave its attempt back)", done.Detail.Attempts, done.Detail.Preemptions)
	}
	if done.Detail.RunningSeconds != 90 || done.Detail.QueuedSeconds != 0 {
		t.Fatalf("durations queued %v running %v, want 0 and 90", done.Detail.QueuedSeconds, done.Detail.RunningSeconds)
	}
	if n, err := e.st.RelayOutbox(e.ctx, rec, 10); n != 0 || err != nil {
		t.Fatalf("a second relay sent %d, %v; every event was already out", n, err)
	}
}

func TestOutboxSurvivesPublishFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := true
	rec := &recorder{fail: func() bool { return down }}
	e.submit("q", "wf-a", 0)
	if _, err := e.st.Cancel(e.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.RelayJob(e.ctx, rec, "q"); !errors.Is(err, errPublish) {
		t.Fatalf("relay with the bus down: %v", err)
	}
	if n, _ := e.st.RelayOutbox(e.ctx, rec, 10); n != 0 {
		t.Fatal("nothing can be sent while the bus is down")
	}
	down = false
	if n, err := e.st.RelayOutbox(e.ctx, rec, 10); n != 1 || err != nil {
		t.Fatalf("relay after recovery sent %d, %v", n, err)
	}
	if ev := rec.ofJob(t, "q", 0); ev.DetailType != store.EventCanceled {
		t.Fatalf("event %+v, want Job Canceled", ev)
	}
}

func TestOutboxConcurrentRelaysNeverDisagree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := &recorder{}
	a := e.register("w1", "gpu", 3)
	for _, id := range []string{"a", "b", "c"} {
		e.submit(id, "wf-a", 0)
		l := e.lease(a)
		if _, err := e.st.Fail(e.ctx, a, l.ID, l.LeaseToken, job.Error{Message: "bad input", Retryable: false}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.st.RelayOutbox(e.ctx, rec, 10); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	evs := rec.byID(t)
	if len(evs) != 3 {
		t.Fatalf("%d distinct events, want one per job", len(evs))
	}
	for id, ev := range evs {
		if ev.DetailType != store.EventDead || ev.Detail.Reason != job.ReasonNotRetryable {
			t.Fatalf("%s: %+v, want Job Dead for not_retryable", id, ev)
		}
	}
}
