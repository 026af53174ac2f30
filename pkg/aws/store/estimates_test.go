package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// An estimate reads the fleet's live jobs one by one: the ready queue in
// lease order across shards, the jobs waiting out a backoff with when they
// are due, and the leased jobs with their workers and lease times.
func TestFleetQueueReadsEachLiveJob(t *testing.T) {
	e := newEnv(t)
	e.submit("low", "wf-a", 0)
	e.clock.Advance(time.Second)
	e.submit("high", "wf-a", 5)
	e.clock.Advance(time.Second)
	e.submit("low2", "wf-b", 0)
	e.clock.Advance(time.Second)
	e.submit("runs", "wf-a", 9)
	e.submit("fails", "wf-b", 8)
	w := e.register("w1", "gpu", 2)
	if got := e.lease(w); got.ID != "runs" {
		t.Fatalf("leased %s first", got.ID)
	}
	failed := e.lease(w)
	leasedAt := e.clock.Now()
	if _, err := e.st.Fail(e.ctx, w, failed.ID, failed.LeaseToken, job.Error{Code: "oom", Message: "m", Retryable: true}); err != nil {
		t.Fatal(err)
	}

	q, err := e.st.FleetQueue(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	var ready []string
	for _, c := range q.Ready {
		ready = append(ready, c.JobID)
		if c.Ref != nil {
			t.Errorf("%s carries the claim's handle", c.JobID)
		}
	}
	if got := strings.Join(ready, ","); got != "high,low,low2" {
		t.Errorf("ready = %s, want high,low,low2 (priority, then age)", got)
	}
	if len(q.Delayed) != 1 || q.Delayed[0].JobID != "fails" || !q.Delayed[0].Due.Equal(e.clock.Now().Add(2*time.Minute)) || q.Delayed[0].Priority != 8 {
		t.Errorf("delayed = %+v, want fails due in the first backoff, 2m", q.Delayed)
	}
	if len(q.Leased) != 1 || q.Leased[0].JobID != "runs" || q.Leased[0].WorkerID != "w1" || q.Leased[0].WorkflowID != "wf-a" || !q.Leased[0].LeasedAt.Equal(leasedAt) {
		t.Errorf("leased = %+v", q.Leased)
	}
}

// Run times come by workflow from the jobs that succeeded within the
// window, at most perShard of the newest per shard.
func TestRecentRunsByWorkflow(t *testing.T) {
	e := newEnv(t)
	w := e.register("w1", "gpu", 1)
	run := func(id, workflow string, d time.Duration) {
		t.Helper()
		e.submit(id, workflow, 0)
		j := e.lease(w)
		e.clock.Advance(d)
		if err := e.st.Complete(e.ctx, w, j.ID, j.LeaseToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	run("old", "wf-a", time.Hour)
	since := e.clock.Now().Add(time.Millisecond)
	run("a1", "wf-a", 30*time.Second)
	run("a2", "wf-a", 10*time.Second)
	run("b1", "wf-b", 90*time.Second)

	runs, err := e.st.RecentRuns(e.ctx, "gpu", since, 10)
	if err != nil {
		t.Fatal(err)
	}
	if a := runs["wf-a"]; len(a) != 2 || a[0] != 10*time.Second || a[1] != 30*time.Second {
		t.Errorf("wf-a runs = %v, want [10s 30s] (the hour-long one is before the window)", a)
	}
	if b := runs["wf-b"]; len(b) != 1 || b[0] != 90*time.Second {
		t.Errorf("wf-b runs = %v", b)
	}
}
