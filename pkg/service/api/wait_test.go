package api_test

import (
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

func TestWaitJobAnswersTheChangedJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme := h.newKey("acme")
	id := h.submit(map[string]any{"job_id": "w", "tenant_id": "acme", "workflow_id": "wf-a"})

	// Already changed from the status given: answered at once.
	r := h.do("GET", "/api/jobs/w/wait?status=accepted", acme, nil)
	h.want(r, 200, "")
	if r.body["status"] != "queued" || r.body["job_id"] != id {
		t.Fatalf("wait from accepted answered %s", r.raw)
	}

	// Waiting on queued: the cancel ends the wait with the canceled job.
	got := make(chan reply, 1)
	go func() { got <- h.do("GET", "/api/jobs/w/wait?status=queued&seconds=25", acme, nil) }()
	h.want(h.do("POST", "/api/jobs/"+id+"/cancel", "op", nil), 200, "")
	r = <-got
	h.want(r, 200, "")
	if r.body["status"] != "canceled" {
		t.Fatalf("wait on a canceled job answered %s", r.raw)
	}
}

func TestWaitJobRefusesOthersAndBadQueries(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acme, globex := h.newKey("acme"), h.newKey("globex")
	id := h.submit(map[string]any{"job_id": "w", "tenant_id": "acme", "workflow_id": "wf-a"})
	worker := h.register("w-wait", "gpu")

	h.want(h.do("GET", "/api/jobs/"+id+"/wait?seconds=1", globex, nil), 404, "not_found")
	h.want(h.do("GET", "/api/jobs/w/wait?seconds=1", globex, nil), 404, "not_found") // globex's own w: none
	h.want(h.do("GET", "/api/jobs/"+id+"/wait?seconds=1", worker, nil), 401, "unauthenticated")
	h.want(h.do("GET", "/api/jobs/"+id+"/wait?seconds=1", "", nil), 401, "unauthenticated")
	for _, q := range []string{"seconds=0", "seconds=26", "seconds=1.5", "seconds=x", "status=running", "status=Queued"} {
		h.want(h.do("GET", "/api/jobs/w/wait?"+q, acme, nil), 400, "invalid_argument")
	}
	if j := h.job(id); j["status"] != "queued" {
		t.Fatalf("after the refusals the job is %v", j["status"])
	}
	// An operator waits on any tenant's job by its full id.
	r := h.do("GET", "/api/jobs/"+id+"/wait?status=accepted", "op", nil)
	h.want(r, 200, "")
}

// With wait_concurrency waits held, the next wait is answered 429 with
// Retry-After at once, and a worker's poll and heartbeat are answered as
// ever; once the held waits end, a wait is admitted again.
func TestWaitsAtTheCapLeaveWorkersAlone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *devstack.Options) { o.Config.WaitConcurrency = 2 })
	acme := h.newKey("acme")
	held := h.submit(map[string]any{"job_id": "held", "tenant_id": "acme", "workflow_id": "wf-c"}) // a fleet without workers
	work := h.submit(map[string]any{"job_id": "work", "tenant_id": "acme", "workflow_id": "wf-a"})

	// Two waits held: each is sent again while a look below holds its
	// place (a look that waits takes one as a wait does).
	got := make(chan reply, 2)
	for range 2 {
		go func() {
			deadline := time.Now().Add(testenv.Patience)
			for {
				r := h.do("GET", "/api/jobs/held/wait?status=queued&seconds=25", acme, nil)
				if r.status != 429 || time.Now().After(deadline) {
					got <- r
					return
				}
			}
		}()
	}
	// A look that waits a second: the first one refused shows both waits
	// held.
	full := func() reply {
		deadline := time.Now().Add(testenv.Patience)
		for {
			r := h.do("GET", "/api/jobs/held/wait?status=queued&seconds=1", acme, nil)
			if r.status != 200 || time.Now().After(deadline) {
				return r
			}
		}
	}
	r := full()
	h.want(r, 429, "rate_limited")
	if ra := r.header.Get("Retry-After"); ra != "2" {
		t.Fatalf("a wait refused at the cap: Retry-After %q, want 2", ra)
	}

	token := h.register("w-cap", "gpu")
	l, pr := h.poll(token)
	h.want(pr, 200, "")
	if l.id != work {
		t.Fatalf("the worker leased %q, want %q", l.id, work)
	}
	h.want(h.do("POST", "/api/worker/heartbeat", token, map[string]any{"job_id": l.id, "lease_token": l.token}), 200, "")
	h.want(full(), 429, "rate_limited") // the waits are still held

	h.want(h.do("POST", "/api/jobs/"+held+"/cancel", "op", nil), 200, "")
	for range 2 {
		r := <-got
		h.want(r, 200, "")
		if r.body["status"] != "canceled" {
			t.Fatalf("a held wait ended with %s", r.raw)
		}
	}
	r = h.do("GET", "/api/jobs/held/wait?status=queued", acme, nil)
	h.want(r, 200, "")
	if r.body["status"] != "canceled" {
		t.Fatalf("a wait after the held ones ended answered %s", r.raw)
	}
}
