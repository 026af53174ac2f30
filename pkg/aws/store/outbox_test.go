package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

// The outbox spreads over several partition keys of the table, chosen by
// the job's id, and takes no index entry (every entry was filed under the
// one by-state key E# before): outcomes and their relays write the
// outbox's shards about evenly, and every entry, whatever its shard, is
// relayed once. BenchmarkCapacityOutbox measures the load at 1,000
// outcomes a second.
func TestOutboxSpreadsOverShards(t *testing.T) {
	t.Parallel()
	const n = 64
	m := newModeledEnv(t, capacityConfig, 0)
	m.createJobs(t, "job", n)
	m.nextSecond()
	rec := &recorder{}
	for i := range n {
		id := fmt.Sprintf("job-%05d", i)
		if _, err := m.st.Cancel(m.ctx, id); err != nil {
			t.Fatal(err)
		}
		if sent, err := m.st.RelayJob(m.ctx, rec, id); sent != 1 || err != nil {
			t.Fatalf("RelayJob(%s) = %d, %v; want its Job Canceled", id, sent, err)
		}
		m.clock.Advance(time.Second / (n + 1))
	}
	if err := m.model.Err(); err != nil {
		t.Fatalf("%d outcomes and their relays in one second: %v", n, err)
	}
	for _, l := range m.model.Loads() {
		if l.Index == store.IndexByState && strings.HasPrefix(l.Key, "E#") {
			t.Fatalf("an outbox entry went to the by-state index: %v", l)
		}
	}
	m.wantWritesSpread(t, fmt.Sprintf("the outbox's writes for %d outcomes (%d write units)", n, 4*n), "OUTBOX#", 4*n/3)
	if got := len(rec.byID(t)); got != n {
		t.Fatalf("%d distinct events published, want %d", got, n)
	}
	if sent, err := m.st.RelayOutbox(m.ctx, rec, 100); sent != 0 || err != nil {
		t.Fatalf("the sweep after every relay sent %d, %v; want the outbox empty", sent, err)
	}
}

// The sweep reads every shard: outcomes whose immediate relay failed are
// relayed by RelayOutbox from whichever shard holds them, each job's
// events in order.
func TestOutboxSweepReadsEveryShard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.register("w1", "gpu", 1)
	var ids []string
	for i := range 24 {
		id := fmt.Sprintf("s-%02d", i)
		ids = append(ids, id)
		e.submit(id, "wf-a", 0)
	}
	// The first job fails once (Job Failed) before it is canceled.
	l := e.lease(a)
	if _, err := e.st.Fail(e.ctx, a, l.ID, l.LeaseToken, job.Error{Code: "oom", Message: "out of memory", Retryable: true}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		e.clock.Advance(time.Millisecond)
		if _, err := e.st.Cancel(e.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	total := 0
	for range 10 { // as Drain does: until nothing is left
		sent, err := e.st.RelayOutbox(e.ctx, rec, 5)
		if err != nil {
			t.Fatal(err)
		}
		if sent == 0 {
			break
		}
		total += sent
	}
	if total != len(ids)+1 {
		t.Fatalf("the sweep sent %d events, want %d (every cancel and the failure)", total, len(ids)+1)
	}
	for _, id := range ids {
		ev := rec.ofJob(t, id, 0)
		if id == l.ID {
			if ev.DetailType != store.EventFailed || rec.ofJob(t, id, 1).DetailType != store.EventCanceled {
				t.Fatalf("job %s: events out of order, first %s", id, ev.DetailType)
			}
			continue
		}
		if ev.DetailType != store.EventCanceled {
			t.Fatalf("job %s: %s, want Job Canceled", id, ev.DetailType)
		}
	}
}

// An event the previous release wrote (PK EVENT#<job>, filed in the E#
// partition of by-state) is still relayed: by the sweep, and by a job's own
// relay, in order with the events today's store wrote for the same job.
func TestOutboxRelaysTheEntriesAnOldReleaseWrote(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, capacityConfig, 0)
	m.createJobs(t, "job", 2)
	legacy := func(jobID, kind, eventType, status string, at time.Time) {
		t.Helper()
		sk := at.UTC().Format("20060102T150405.000Z") + "#" + kind
		item := map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "EVENT#" + jobID}, "SK": &types.AttributeValueMemberS{Value: sk},
			"GSI1PK": &types.AttributeValueMemberS{Value: "E#"}, "GSI1SK": &types.AttributeValueMemberS{Value: at.UTC().Format("20060102T150405.000Z") + "#" + jobID},
			"type": &types.AttributeValueMemberS{Value: "event"}, "event_id": &types.AttributeValueMemberS{Value: jobID + "@" + sk},
			"event_type": &types.AttributeValueMemberS{Value: eventType}, "job_id": &types.AttributeValueMemberS{Value: jobID},
			"at_ms": &types.AttributeValueMemberN{Value: fmt.Sprint(at.UnixMilli())}, "status": &types.AttributeValueMemberS{Value: status},
			"attempts": &types.AttributeValueMemberN{Value: "1"}, "preemptions": &types.AttributeValueMemberN{Value: "0"},
			"ttl": &types.AttributeValueMemberN{Value: fmt.Sprint(at.Add(14 * 24 * time.Hour).Unix())},
		}
		if _, err := m.client.PutItem(m.ctx, &dynamodb.PutItemInput{TableName: &m.table, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	// job-00000: only an old Job Failed. job-00001: an old Job Failed, then
	// today's Job Canceled.
	legacy("job-00000", "failed", store.EventFailed, "queued", m.clock.Now())
	legacy("job-00001", "failed", store.EventFailed, "queued", m.clock.Now())
	m.clock.Advance(time.Second)
	if _, err := m.st.Cancel(m.ctx, "job-00001"); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if sent, err := m.st.RelayJob(m.ctx, rec, "job-00001"); sent != 2 || err != nil {
		t.Fatalf("RelayJob = %d, %v; want the old Job Failed and today's Job Canceled", sent, err)
	}
	if a, b := rec.ofJob(t, "job-00001", 0), rec.ofJob(t, "job-00001", 1); a.DetailType != store.EventFailed || b.DetailType != store.EventCanceled {
		t.Fatalf("job-00001's events in the order %s, %s; want Job Failed, then Job Canceled", a.DetailType, b.DetailType)
	}
	if sent, err := m.st.RelayOutbox(m.ctx, rec, 10); sent != 1 || err != nil {
		t.Fatalf("RelayOutbox = %d, %v; want the old release's one event left", sent, err)
	}
	if ev := rec.ofJob(t, "job-00000", 0); ev.DetailType != store.EventFailed || ev.ID != "job-00000@"+t0.Format("20060102T150405.000Z")+"#failed" {
		t.Fatalf("relayed %+v, want the old Job Failed under its own id", ev)
	}
	if sent, err := m.st.RelayOutbox(m.ctx, rec, 10); sent != 0 || err != nil {
		t.Fatalf("a second sweep sent %d, %v; want nothing left", sent, err)
	}
}

// acceptsThenFails publishes every event and then answers an error, fails
// times: a relay that dies after its publish and before its delete.
type acceptsThenFails struct {
	*recorder
	fails int
}

func (p *acceptsThenFails) Publish(ctx context.Context, evs []store.JobEvent) error {
	if err := p.recorder.Publish(ctx, evs); err != nil {
		return err
	}
	if p.fails > 0 {
		p.fails--
		return errPublish
	}
	return nil
}

// An outcome whose relay failed after publishing is relayed again, under
// the same event id, and never as a second outcome.
func TestOutboxRelaysAgainUnderTheSameIDAfterAFailedRelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.register("w1", "gpu", 1)
	e.submit("f", "wf-a", 0)
	l := e.lease(a)
	if err := e.st.Complete(e.ctx, a, "f", l.LeaseToken, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	p := &acceptsThenFails{recorder: &recorder{}, fails: 2}
	if _, err := e.st.RelayJob(e.ctx, p, "f"); !errors.Is(err, errPublish) {
		t.Fatalf("RelayJob = %v, want the publish's failure", err)
	}
	if _, err := e.st.RelayOutbox(e.ctx, p, 10); !errors.Is(err, errPublish) {
		t.Fatalf("RelayOutbox = %v, want the publish's failure", err)
	}
	if n, err := e.st.RelayOutbox(e.ctx, p, 10); n != 1 || err != nil {
		t.Fatalf("RelayOutbox = %d, %v; want the outcome sent again", n, err)
	}
	if n, err := e.st.RelayOutbox(e.ctx, p, 10); n != 0 || err != nil {
		t.Fatalf("RelayOutbox = %d, %v; want nothing left", n, err)
	}
	if len(p.events) != 3 {
		t.Fatalf("%d publishes, want 3 (two failed relays and the one that finished)", len(p.events))
	}
	evs := p.byID(t)
	if len(evs) != 1 {
		t.Fatalf("%d distinct event ids for one outcome, want 1", len(evs))
	}
	for _, ev := range evs {
		if ev.DetailType != store.EventSucceeded {
			t.Fatalf("event %+v, want Job Succeeded", ev)
		}
	}
}
