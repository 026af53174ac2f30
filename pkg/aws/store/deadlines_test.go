package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

func (e *env) submitWith(n job.Spec) {
	e.t.Helper()
	if n.TenantID == "" {
		n.TenantID = "t1"
	}
	if _, created, err := e.st.CreateJob(e.ctx, n); err != nil || !created {
		e.t.Fatalf("CreateJob(%s) = %v, %v", n.ID, created, err)
	}
}

func (e *env) status(id string) job.Job {
	e.t.Helper()
	j, err := e.st.GetJob(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func TestQueueTimeoutKillsAJobNobodyLeased(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submitWith(job.Spec{ID: "late", WorkflowID: "wf-a", QueueTimeoutSeconds: 60})
	e.submitWith(job.Spec{ID: "patient", WorkflowID: "wf-a"})
	a := e.register("w1", "gpu", 1)
	e.clock.Advance(61 * time.Second)

	got := e.lease(a)
	if got.ID != "patient" {
		t.Fatalf("leased %s, want the job without a queue timeout", got.ID)
	}
	j := e.status("late")
	if j.Status != job.Dead || j.Reason != job.ReasonQueueTimeout || j.Error == nil || j.Error.Retryable {
		t.Fatalf("late job: %s (%s) %+v, want dead for queue_timeout", j.Status, j.Reason, j.Error)
	}
	rec := &recorder{}
	if _, err := e.st.RelayOutbox(e.ctx, rec, 10); err != nil {
		t.Fatal(err)
	}
	if ev := rec.ofJob(t, "late", 0); ev.DetailType != store.EventDead || ev.Detail.Reason != job.ReasonQueueTimeout {
		t.Fatalf("event %+v, want Job Dead for queue_timeout", ev)
	}
}

func TestQueueTimeoutExpiresWithoutPolls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submitWith(job.Spec{ID: "a", WorkflowID: "wf-a", QueueTimeoutSeconds: 30})
	e.submitWith(job.Spec{ID: "b", WorkflowID: "wf-a", QueueTimeoutSeconds: 300})
	e.clock.Advance(31 * time.Second)
	r, err := e.st.Sweep(e.ctx, "gpu")
	n := r.QueueExpired
	if err != nil || n != 1 {
		t.Fatalf("expired %d, %v; want exactly the job past its deadline", n, err)
	}
	if e.status("a").Status != job.Dead || e.status("b").Status != job.Queued {
		t.Fatal("only the job past its queue deadline dies")
	}
}

func TestQueueTimeoutCountsOnlyUntilTheFirstLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submitWith(job.Spec{ID: "j", WorkflowID: "wf-a", QueueTimeoutSeconds: 60})
	a := e.register("w1", "gpu", 1)
	l := e.lease(a)
	if _, err := e.st.Requeue(e.ctx, a, "j", l.LeaseToken, job.SpotInterruption); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Minute)
	if r, _ := e.st.Sweep(e.ctx, "gpu"); r.QueueExpired != 0 {
		t.Fatal("a job that was leased once is past its queue timeout's reach")
	}
	if got := e.lease(a); got.ID != "j" {
		t.Fatalf("leased %q, want the requeued job", got.ID)
	}
}

func TestRunTimeoutCapsHeartbeatsAndFailsTheAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // lease 120s, backoff 2m
	e.submitWith(job.Spec{ID: "j", WorkflowID: "wf-a", TimeoutSeconds: 300})
	a := e.register("w1", "gpu", 1)
	l := e.lease(a)
	if !l.LeaseExpiresAt.Equal(t0.Add(120 * time.Second)) {
		t.Fatalf("first lease until %v", l.LeaseExpiresAt)
	}
	e.clock.Advance(250 * time.Second)
	hb, err := e.st.Heartbeat(e.ctx, a, "j", l.LeaseToken, nil)
	if err != nil || !hb.LeaseExpiresAt.Equal(t0.Add(300*time.Second)) {
		t.Fatalf("heartbeat near the deadline: %v until %v, want the lease to end at the run deadline", err, hb.LeaseExpiresAt)
	}
	e.clock.Advance(51 * time.Second)
	if _, err := e.st.Heartbeat(e.ctx, a, "j", l.LeaseToken, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("heartbeat past the deadline: %v, want lease lost", err)
	}
	j := e.status("j")
	if j.Status != job.Queued || j.Reason != job.ReasonRunTimeout || j.Attempts != 1 || j.Error == nil || !j.Error.Retryable {
		t.Fatalf("after the overrun: %s (%s) attempts %d error %+v, want queued for run_timeout, attempt spent", j.Status, j.Reason, j.Attempts, j.Error)
	}
	if !j.NotBefore.Equal(e.clock.Now().Add(2 * time.Minute)) {
		t.Fatalf("retry at %v, want after the fleet's backoff", j.NotBefore)
	}
	if w, _ := e.st.GetWorker(e.ctx, "w1"); w.Leases != 0 {
		t.Fatalf("worker still counts %d leases", w.Leases)
	}
	if err := e.st.Complete(e.ctx, a, "j", l.LeaseToken, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a late completion: %v, want lease lost", err)
	}
}

func TestRunTimeoutOfASilentWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submitWith(job.Spec{ID: "j", WorkflowID: "wf-a", TimeoutSeconds: 60})
	a := e.register("w1", "gpu", 1)
	l := e.lease(a)
	if !l.LeaseExpiresAt.Equal(t0.Add(60 * time.Second)) {
		t.Fatalf("lease until %v, want the run deadline (shorter than the lease time)", l.LeaseExpiresAt)
	}
	e.clock.Advance(61 * time.Second)
	if _, err := e.st.Sweep(e.ctx, "gpu"); err != nil {
		t.Fatal(err)
	}
	if j := e.status("j"); j.Status != job.Queued || j.Reason != job.ReasonRunTimeout {
		t.Fatalf("after the sweep: %s (%s), want queued for run_timeout", j.Status, j.Reason)
	}
}

// A poll that finds a lease run out at its run deadline ends it, and the
// attempt's backoff files the job among the delayed retries: the poll does
// not try to claim it (the claim could only fail), nor count a lost claim.
func TestRunTimeoutInItsBackoffCostsNoClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submitWith(job.Spec{ID: "j", WorkflowID: "wf-a", TimeoutSeconds: 60})
	w1 := e.register("w1", "gpu", 1)
	w2 := e.register("w2", "gpu", 1)
	e.lease(w1)
	before := e.st.LeaseStats()
	e.clock.Advance(61 * time.Second)
	e.noLease(w2, store.ErrNoJob)
	j := e.status("j")
	if j.Status != job.Queued || j.Reason != job.ReasonRunTimeout || !j.NotBefore.After(e.clock.Now()) {
		t.Fatalf("after the poll: %s (%s), not before %s; want queued for run_timeout, in its backoff", j.Status, j.Reason, j.NotBefore)
	}
	if after := e.st.LeaseStats(); after.Conflicts != before.Conflicts {
		t.Fatalf("the poll tried a claim it could only lose: lost claims %d → %d", before.Conflicts, after.Conflicts)
	}
	e.clock.Advance(2 * time.Minute)
	if got := e.lease(w2); got.ID != "j" {
		t.Fatalf("after its backoff, w2 leased %q", got.ID)
	}
}
