package api_test

import (
	"testing"
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
