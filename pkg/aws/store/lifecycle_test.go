package store_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/lease"
)

func TestCreateJobIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.submit("j1", "wf-a", 0)
	if first.FleetSlug != "gpu" || first.MaxAttempts != 3 || first.MaxPreemptions != 2 || first.Status != job.Queued {
		t.Fatalf("created job = %+v", first)
	}
	e.clock.Advance(time.Minute)
	// The same tenant's repeat answers the first job (another tenant's is
	// refused: TestCreateJobNeverAnswersAnotherTenantsJob).
	again, created, err := e.st.CreateJob(e.ctx, job.Spec{ID: "j1", TenantID: "t1", WorkflowID: "wf-b", Input: json.RawMessage(`{"other":true}`)})
	if err != nil || created {
		t.Fatalf("repeat CreateJob = created %v, %v", created, err)
	}
	if err := same(first, again); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.st.CreateJob(e.ctx, job.Spec{ID: "j2", TenantID: "t", WorkflowID: "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown workflow: %v", err)
	}
}

func TestLeaseOrderIsPriorityThenAge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("old-low", "wf-a", 0)
	e.clock.Advance(time.Second)
	e.submit("new-high", "wf-b", 5)
	e.clock.Advance(time.Second)
	e.submit("newer-low", "wf-a", 0)
	e.clock.Advance(time.Second)
	e.submit("old-high", "wf-a", 5) // same priority as new-high but younger
	e.submit("negative", "wf-a", -3)
	w := e.register("w1", "gpu", 10)
	var got []string
	for range 5 {
		got = append(got, e.lease(w).ID)
	}
	want := []string{"new-high", "old-high", "old-low", "newer-low", "negative"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lease order = %v, want %v", got, want)
		}
	}
	e.noLease(w, store.ErrNoJob)
}

func TestLeaseOnlyServedWorkflows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("a", "wf-a", 0)
	e.submit("b", "wf-b", 9)
	w := e.register("w1", "gpu", 5)
	j, err := e.st.LeaseNext(e.ctx, w, []string{"wf-a"})
	if err != nil || j.ID != "a" {
		t.Fatalf("LeaseNext(wf-a only) = %q, %v", j.ID, err)
	}
	if _, err := e.st.LeaseNext(e.ctx, w, []string{"wf-a"}); !errors.Is(err, store.ErrNoJob) {
		t.Fatalf("second lease: %v", err)
	}
	// A worker of another fleet never sees this fleet's jobs.
	e.cfg.Fleets[1].RequireApproval = false
	o := e.register("w2", "other", 5)
	e.noLease(o, store.ErrNoJob)
}

func TestLeaseGrantsFreshFencedLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	j := e.lease(w)
	if j.Status != job.Leased || j.WorkerID != "w1" || j.Attempts != 1 || len(j.LeaseToken) != 32 {
		t.Fatalf("leased job = %+v", j)
	}
	if !j.LeaseExpiresAt.Equal(t0.Add(120 * time.Second)) {
		t.Fatalf("lease expires %s", j.LeaseExpiresAt)
	}
	if idle := e.worker("w1").IdleSince(); !idle.IsZero() {
		t.Fatalf("a worker with a lease is idle since %s", idle)
	}
	if string(j.Input) != `{"n":1}` {
		t.Fatalf("input = %s", j.Input)
	}
	e.wantLeases("w1", 1)
	// At max_concurrency the worker gets nothing more.
	e.submit("j2", "wf-a", 0)
	e.noLease(w, store.ErrNoJob)
}

func TestStaleTokenChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 2)
	other := e.register("w2", "gpu", 2)
	leased := e.lease(w)
	before := e.job("j")
	bad := "00000000000000000000000000000000"
	p := 0.5
	if _, err := e.st.Heartbeat(e.ctx, w, "j", bad, &p); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := e.st.Complete(e.ctx, w, "j", bad, json.RawMessage(`{}`)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("complete: %v", err)
	}
	if _, err := e.st.Fail(e.ctx, w, "j", bad, job.Error{Message: "x", Retryable: true}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("fail: %v", err)
	}
	if _, err := e.st.Requeue(e.ctx, w, "j", bad, job.SpotInterruption); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("requeue: %v", err)
	}
	// The right token from the wrong worker is refused too.
	if err := e.st.Complete(e.ctx, other, "j", leased.LeaseToken, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("complete by another worker: %v", err)
	}
	if err := same(before, e.job("j")); err != nil {
		t.Fatal(err)
	}
	e.wantLeases("w1", 1)
	e.wantLeases("w2", 0)
}

// A heartbeat checks the worker's current token in its own write: once the
// token is rotated, the old one extends nothing, and the new one takes the
// lease over.
func TestHeartbeatIsRefusedWithAReplacedToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	old := e.register("w1", "gpu", 1)
	j := e.lease(old)
	p := 0.25
	if _, err := e.st.Heartbeat(e.ctx, old, "j", j.LeaseToken, &p); err != nil {
		t.Fatalf("heartbeat before the rotation: %v", err)
	}
	if _, err := e.st.RotateWorkerToken(e.ctx, "w1", "hash-w1-rotated"); err != nil {
		t.Fatal(err)
	}
	before := e.job("j")
	e.clock.Advance(30 * time.Second)
	p = 0.75
	if _, err := e.st.Heartbeat(e.ctx, old, "j", j.LeaseToken, &p); !errors.Is(err, store.ErrUnauthenticated) {
		t.Fatalf("heartbeat with the replaced token: %v, want %v", err, store.ErrUnauthenticated)
	}
	if err := same(before, e.job("j")); err != nil {
		t.Fatalf("a heartbeat with the replaced token changed the job: %v", err)
	}
	rotated := store.WorkerAuth{WorkerID: "w1", Fleet: "gpu", TokenHash: "hash-w1-rotated"}
	for i := range 2 { // the first takes the lease over, the second is the plain write
		res, err := e.st.Heartbeat(e.ctx, rotated, "j", j.LeaseToken, &p)
		if err != nil {
			t.Fatalf("heartbeat %d with the current token: %v", i, err)
		}
		if want := e.clock.Now().Add(120 * time.Second); !res.LeaseExpiresAt.Equal(want) {
			t.Fatalf("heartbeat %d: lease expires %s, want %s", i, res.LeaseExpiresAt, want)
		}
	}
	if _, err := e.st.Heartbeat(e.ctx, old, "j", j.LeaseToken, &p); !errors.Is(err, store.ErrUnauthenticated) {
		t.Fatalf("heartbeat with the replaced token after the takeover: %v", err)
	}
	if _, err := e.st.MarkWorkerUnhealthy(e.ctx, old); !errors.Is(err, store.ErrUnauthenticated) {
		t.Fatalf("unhealthy with the replaced token: %v", err)
	}
	if err := e.st.Complete(e.ctx, rotated, "j", j.LeaseToken, json.RawMessage(`{}`)); err != nil {
		t.Fatalf("complete with the current token: %v", err)
	}
}

func TestHeartbeatExtendsLeasePastItsFiledExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	j := e.lease(w)
	e.clock.Advance(100 * time.Second)
	p := 0.25
	res, err := e.st.Heartbeat(e.ctx, w, "j", j.LeaseToken, &p)
	if err != nil || res.Cancel {
		t.Fatalf("heartbeat = %+v, %v", res, err)
	}
	if want := t0.Add(220 * time.Second); !res.LeaseExpiresAt.Equal(want) {
		t.Fatalf("lease now expires %s, want %s", res.LeaseExpiresAt, want)
	}
	got := e.job("j")
	if got.Progress == nil || *got.Progress != 0.25 || !got.LeaseExpiresAt.Equal(res.LeaseExpiresAt) {
		t.Fatalf("job after heartbeat: %+v", got)
	}
	// The heartbeat wrote the job only: the worker was last seen at its
	// claim (a worker holding a live lease counts as seen in the scaler).
	if seen := e.worker("w1").LastSeenAt; !seen.Equal(t0) {
		t.Fatalf("worker last seen %s, want its claim's %s", seen, t0)
	}
	// Past the original expiry the lease still holds: a sweep leaves it,
	// and nobody can take the job.
	e.clock.Advance(60 * time.Second)
	if r, err := e.st.Sweep(e.ctx, "gpu"); err != nil || r.Leases != (lease.Expired{}) {
		t.Fatalf("sweep past the filed expiry = %+v, %v; want nothing ended", r, err)
	}
	other := e.register("w2", "gpu", 1)
	e.noLease(other, store.ErrNoJob)
	if got := e.wantStatus("j", job.Leased); got.LeaseToken != j.LeaseToken || !got.LeaseExpiresAt.Equal(res.LeaseExpiresAt) {
		t.Fatalf("job after the sweep: %+v", got)
	}
	// Past the heartbeat's expiry it runs out.
	e.clock.Advance(61 * time.Second)
	if r, err := e.st.Sweep(e.ctx, "gpu"); err != nil || r.Leases.Requeued != 1 {
		t.Fatalf("sweep past the heartbeat's expiry = %+v, %v; want the lease ended", r, err)
	}
	e.wantStatus("j", job.Queued)
}

func TestCompleteIsIdempotentAndTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	j := e.lease(w)
	e.clock.Advance(time.Minute)
	if err := e.st.Complete(e.ctx, w, "j", j.LeaseToken, json.RawMessage(`{"url":"s3://x"}`)); err != nil {
		t.Fatal(err)
	}
	done := e.wantStatus("j", job.Succeeded)
	if string(done.Result) != `{"url":"s3://x"}` || done.Attempts != 1 {
		t.Fatalf("completed job = %+v", done)
	}
	e.wantLeases("w1", 0)
	if idle := e.worker("w1").IdleSince(); !idle.Equal(t0.Add(time.Minute)) {
		t.Fatalf("worker idle since %s, want the completion time", idle)
	}
	if err := e.st.Complete(e.ctx, w, "j", j.LeaseToken, json.RawMessage(`{"url":"s3://x"}`)); err != nil {
		t.Fatalf("repeat complete: %v", err)
	}
	if err := same(done, e.job("j")); err != nil {
		t.Fatal(err)
	}
	e.wantLeases("w1", 0)
	if _, err := e.st.Fail(e.ctx, w, "j", j.LeaseToken, job.Error{Message: "late", Retryable: true}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("fail after complete: %v", err)
	}
}

func TestFailRetriesAfterBackoffThenDies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	backoffs := []time.Duration{2 * time.Minute, 10 * time.Minute}
	for attempt := 1; attempt <= 3; attempt++ {
		j := e.lease(w)
		if j.ID != "j" || j.Attempts != attempt {
			t.Fatalf("attempt %d: leased %+v", attempt, j)
		}
		out, err := e.st.Fail(e.ctx, w, "j", j.LeaseToken, job.Error{Code: "oom", Message: "CUDA out of memory", Retryable: true})
		if err != nil {
			t.Fatal(err)
		}
		if attempt == 3 {
			if out.Status != job.Dead {
				t.Fatalf("after the last attempt: %+v", out)
			}
			break
		}
		wantNB := e.clock.Now().Add(backoffs[attempt-1])
		if out.Status != job.Queued || !out.NotBefore.Equal(wantNB) {
			t.Fatalf("attempt %d: outcome %+v, want queued until %s", attempt, out, wantNB)
		}
		// Repeating the report answers the same and changes nothing.
		before := e.job("j")
		again, err := e.st.Fail(e.ctx, w, "j", j.LeaseToken, job.Error{Message: "again", Retryable: true})
		if err != nil || again.Status != job.Queued || !again.NotBefore.Equal(wantNB) {
			t.Fatalf("repeat fail = %+v, %v", again, err)
		}
		if err := same(before, e.job("j")); err != nil {
			t.Fatal(err)
		}
		e.wantLeases("w1", 0)
		// Not leasable during the backoff...
		e.clock.Advance(backoffs[attempt-1] - time.Second)
		e.noLease(w, store.ErrNoJob)
		// ...and leasable once it has passed.
		e.clock.Advance(time.Second)
	}
	dead := e.wantStatus("j", job.Dead)
	if dead.Reason != job.ReasonAttemptsSpent || dead.Error == nil || dead.Error.Code != "oom" || dead.Attempts != 3 {
		t.Fatalf("dead job = %+v", dead)
	}
}

func TestNonRetryableFailureIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	j := e.lease(w)
	out, err := e.st.Fail(e.ctx, w, "j", j.LeaseToken, job.Error{Code: "bad_input", Message: "not a scene", Retryable: false})
	if err != nil || out.Status != job.Dead {
		t.Fatalf("fail = %+v, %v", out, err)
	}
	if d := e.wantStatus("j", job.Dead); d.Reason != job.ReasonNotRetryable || d.Attempts != 1 {
		t.Fatalf("dead = %+v", d)
	}
}

func TestExpiredLeaseIsClaimableAndFencesOldWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	w1 := e.register("w1", "gpu", 1)
	w2 := e.register("w2", "gpu", 1)
	first := e.lease(w1)
	e.clock.Advance(119 * time.Second)
	e.noLease(w2, store.ErrNoJob) // not yet expired
	e.clock.Advance(time.Second)
	second := e.lease(w2)
	if second.ID != "j" || second.Attempts != 2 || second.LeaseToken == first.LeaseToken {
		t.Fatalf("re-leased job = %+v", second)
	}
	e.wantLeases("w1", 0) // the expired lease no longer counts against w1
	if err := e.st.Complete(e.ctx, w1, "j", first.LeaseToken, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late complete by the first worker: %v", err)
	}
	if _, err := e.st.Heartbeat(e.ctx, w1, "j", first.LeaseToken, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("late heartbeat by the first worker: %v", err)
	}
	if err := e.st.Complete(e.ctx, w2, "j", second.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	h := e.job("j").History
	var reasons []string
	for _, x := range h {
		reasons = append(reasons, string(x.To)+":"+string(x.Reason))
	}
	if len(h) != 5 || h[2].Reason != job.ReasonLeaseExpired {
		t.Fatalf("history = %v", reasons)
	}
}

// Jobs a poll brings back itself (a retry whose backoff has passed, a lease
// that ran out) are tried in the lease rule's order like any other: the
// higher priority first, whichever way it came back.
func TestReclaimedJobsAreLeasedByTheLeaseRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("high", "wf-a", 5)
	e.submit("low", "wf-a", 0)
	w1 := e.register("w1", "gpu", 2)
	w2 := e.register("w2", "gpu", 1)
	if j := e.lease(w1); j.ID != "high" {
		t.Fatalf("first lease %q, want high", j.ID)
	}
	low := e.lease(w1)
	if _, err := e.st.Fail(e.ctx, w1, "low", low.LeaseToken, job.Error{Message: "try again", Retryable: true}); err != nil {
		t.Fatal(err)
	}
	// Past low's backoff (2m) and high's lease (120 s, never heartbeated):
	// nothing is ready until the poll brings both back.
	e.clock.Advance(2*time.Minute + time.Second)
	if j := e.lease(w2); j.ID != "high" {
		t.Fatalf("the poll that brought back a due retry (priority 0) and an expired lease (priority 5) leased %q, want high", j.ID)
	}
}

func TestSweepExpiredLeasesSpendsAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	for attempt := 1; attempt <= 3; attempt++ {
		j := e.lease(w)
		if j.Attempts != attempt {
			t.Fatalf("attempt %d leased as %d", attempt, j.Attempts)
		}
		e.clock.Advance(121 * time.Second)
		r, err := e.st.Sweep(e.ctx, "gpu")
		if err != nil {
			t.Fatal(err)
		}
		if attempt < 3 && (r.Leases.Requeued != 1 || r.Leases.Dead != 0) {
			t.Fatalf("sweep %d = %+v", attempt, r)
		}
		if attempt == 3 && (r.Leases.Dead != 1 || r.Leases.Requeued != 0) {
			t.Fatalf("last sweep = %+v", r)
		}
		e.wantLeases("w1", 0)
	}
	d := e.wantStatus("j", job.Dead)
	if d.Error == nil || d.Error.Code != string(job.ReasonLeaseExpired) {
		t.Fatalf("dead job = %+v", d)
	}
	// A second sweep finds nothing.
	if r, err := e.st.Sweep(e.ctx, "gpu"); err != nil || r.Leases != (lease.Expired{}) {
		t.Fatalf("second sweep = %+v, %v", r, err)
	}
}

func TestPreemptionKeepsAttemptsUntilItsCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // preemption_cap: 2
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	for i := 1; i <= 2; i++ {
		j := e.lease(w)
		if j.Attempts != 1 {
			t.Fatalf("lease %d spent attempts: %d", i, j.Attempts)
		}
		out, err := e.st.Requeue(e.ctx, w, "j", j.LeaseToken, job.SpotInterruption)
		if err != nil || out.Status != job.Queued || !out.NotBefore.IsZero() {
			t.Fatalf("requeue %d = %+v, %v", i, out, err)
		}
		q := e.wantStatus("j", job.Queued)
		if q.Attempts != 0 || q.Preemptions != i || q.Reason != job.SpotInterruption.Reason() {
			t.Fatalf("after requeue %d: %+v", i, q)
		}
	}
	j := e.lease(w)
	out, err := e.st.Requeue(e.ctx, w, "j", j.LeaseToken, job.Shutdown)
	if err != nil || out.Status != job.Dead {
		t.Fatalf("requeue past the cap = %+v, %v", out, err)
	}
	if d := e.wantStatus("j", job.Dead); d.Reason != job.ReasonPreemptionCap || d.Preemptions != 3 {
		t.Fatalf("dead = %+v", d)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("queued", "wf-a", 0)
	e.submit("leased", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	if s, err := e.st.Cancel(e.ctx, "queued"); err != nil || s != job.Canceled {
		t.Fatalf("cancel queued = %s, %v", s, err)
	}
	j := e.lease(w)
	if j.ID != "leased" {
		t.Fatalf("leased %s, want the job that was not canceled", j.ID)
	}
	if s, err := e.st.Cancel(e.ctx, "leased"); err != nil || s != job.Canceled {
		t.Fatalf("cancel leased = %s, %v", s, err)
	}
	e.wantStatus("leased", job.Canceled)
	e.wantLeases("w1", 0)
	hb, err := e.st.Heartbeat(e.ctx, w, "leased", j.LeaseToken, nil)
	if err != nil || !hb.Cancel {
		t.Fatalf("heartbeat after cancel = %+v, %v", hb, err)
	}
	if err := e.st.Complete(e.ctx, w, "leased", j.LeaseToken, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("complete after cancel: %v", err)
	}
	if s, err := e.st.Cancel(e.ctx, "leased"); err != nil || s != job.Canceled {
		t.Fatalf("repeat cancel = %s, %v", s, err)
	}
	e.submit("done", "wf-a", 0)
	d := e.lease(w)
	if err := e.st.Complete(e.ctx, w, "done", d.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Cancel(e.ctx, "done"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("cancel succeeded job: %v", err)
	}
	if _, err := e.st.Cancel(e.ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancel missing job: %v", err)
	}
}

func TestRetryDead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	j := e.lease(w)
	if _, err := e.st.Fail(e.ctx, w, "j", j.LeaseToken, job.Error{Message: "bad", Retryable: false}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.RetryDead(e.ctx, "j"); err != nil {
		t.Fatal(err)
	}
	q := e.wantStatus("j", job.Queued)
	if q.Attempts != 0 || q.Error != nil || q.Reason != job.ReasonOperatorRetry {
		t.Fatalf("retried = %+v", q)
	}
	if again := e.lease(w); again.Attempts != 1 {
		t.Fatalf("re-leased attempts = %d", again.Attempts)
	}
	if _, err := e.st.RetryDead(e.ctx, "j"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("retry of a leased job: %v", err)
	}
}

func TestHistoryStaysBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.cfg.Fleets[0].PreemptionCap = 100
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	for range 40 {
		j := e.lease(w)
		if _, err := e.st.Requeue(e.ctx, w, "j", j.LeaseToken, job.Rebalance); err != nil {
			t.Fatal(err)
		}
		if n := len(e.job("j").History); n > job.HistoryLimit+2 {
			t.Fatalf("history grew to %d entries", n)
		}
	}
	j := e.lease(w)
	if err := e.st.Complete(e.ctx, w, "j", j.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	h := e.job("j").History
	if len(h) > job.HistoryLimit+2 || h[len(h)-1].To != job.Succeeded {
		t.Fatalf("final history has %d entries, last %+v", len(h), h[len(h)-1])
	}
}

func TestTerminalJobsExpireByTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	j := e.lease(w)
	if err := e.st.Complete(e.ctx, w, "j", j.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	ttl, err := e.st.JobTTL(e.ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(30 * 24 * time.Hour).Unix(); ttl != want {
		t.Fatalf("ttl = %d, want %d", ttl, want)
	}
}

func TestCountBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		e.submit(id, "wf-a", 0)
	}
	w := e.register("w1", "gpu", 3)
	l1, l2 := e.lease(w), e.lease(w)
	if _, err := e.st.Fail(e.ctx, w, l2.ID, l2.LeaseToken, job.Error{Message: "x", Retryable: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Complete(e.ctx, w, l1.ID, l1.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	e.lease(w)
	b, err := e.st.CountBacklog(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if b != (fleetstate.Backlog{Ready: 1, Delayed: 1, Leased: 1}) || b.Queued() != 2 {
		t.Fatalf("backlog = %+v", b)
	}
}
