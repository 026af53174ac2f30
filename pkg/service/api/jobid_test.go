package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

// newManualHarness is a dev stack whose submissions wait in the queue until
// the test dispatches them (dispatch), so a job can be looked at between
// its submit and its dispatch. No relay runs on a schedule: the API
// announces each transition it makes at once.
func newManualHarness(t *testing.T) *harness {
	t.Helper()
	return newHarness(t, func(o *devstack.Options) { o.ManualDispatch, o.RelayInterval = true, -1 })
}

// dispatch hands the waiting submissions to the dispatch function and
// answers how many there were.
func (h *harness) dispatch() int {
	h.t.Helper()
	return h.stack.DispatchQueued(context.Background())
}

// eventsOf are the job events published for a job, by detail type.
func (h *harness) eventsOf(id string) []string {
	var out []string
	for _, e := range h.stack.Events.Recent(0) {
		if e.Detail.JobID == id {
			out = append(out, e.DetailType)
		}
	}
	return out
}

// TestASubmittedJobExistsAtOnce: GET answers a job from the moment submit
// answers, as accepted until dispatch has filed it, then queued.
func TestASubmittedJobExistsAtOnce(t *testing.T) {
	t.Parallel()
	h := newManualHarness(t)
	r := h.do("POST", "/api/jobs", "op", map[string]any{"job_id": "first", "tenant_id": "acme", "workflow_id": "wf-a", "priority": 3})
	h.want(r, 202, "")
	if r.body["job_id"] != "acme:first" || r.body["status"] != "accepted" {
		t.Fatalf("submit answered %s", r.raw)
	}
	j := h.job("acme:first")
	if j["status"] != "accepted" || j["tenant_id"] != "acme" || j["workflow_id"] != "wf-a" || j["fleet_slug"] != "gpu" || j["priority"] != float64(3) {
		t.Fatalf("GET before dispatch = %v", j)
	}
	if r := h.do("GET", "/api/admin/jobs?status=accepted", "op", nil); r.status != 200 || !strings.Contains(string(r.raw), `"acme:first"`) {
		t.Fatalf("the accepted listing: %d %s", r.status, r.raw)
	}
	if n := h.dispatch(); n != 1 {
		t.Fatalf("dispatched %d submissions, want 1", n)
	}
	j = h.job("acme:first")
	if j["status"] != "queued" || j["created_at"] == nil {
		t.Fatalf("GET after dispatch = %v", j)
	}
	if r := h.do("GET", "/api/admin/jobs?status=accepted", "op", nil); strings.Contains(string(r.raw), `"acme:first"`) {
		t.Fatalf("the filed job is still listed as accepted: %s", r.raw)
	}
	token := h.register("w1", "gpu")
	if l, r := h.poll(token); r.status != 200 || l.id != "acme:first" {
		t.Fatalf("poll: %d %s", r.status, r.raw)
	}
}

// TestACancelBeforeDispatchSticks: a job canceled while accepted is never
// queued or leased; its outcome is canceled, announced once.
func TestACancelBeforeDispatchSticks(t *testing.T) {
	t.Parallel()
	h := newManualHarness(t)
	token := h.register("w1", "gpu")
	h.want(h.do("POST", "/api/jobs", "op", map[string]any{"job_id": "regret", "tenant_id": "acme", "workflow_id": "wf-a"}), 202, "")
	r := h.do("POST", "/api/jobs/acme:regret/cancel", "op", nil)
	h.want(r, 200, "")
	if r.body["status"] != "canceled" {
		t.Fatalf("cancel answered %s", r.raw)
	}
	if j := h.job("acme:regret"); j["status"] != "canceled" {
		t.Fatalf("GET after the cancel = %v", j)
	}
	// A resubmission before dispatch changes nothing.
	h.want(h.do("POST", "/api/jobs", "op", map[string]any{"job_id": "regret", "tenant_id": "acme", "workflow_id": "wf-a"}), 202, "")
	h.dispatch()
	if j := h.job("acme:regret"); j["status"] != "canceled" {
		t.Fatalf("GET after dispatch = %v; the cancel did not stick", j)
	}
	if _, r := h.poll(token); r.status != 204 {
		t.Fatalf("the canceled job was leased: %d %s", r.status, r.raw)
	}
	if _, err := h.stack.Relay.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if evs := h.eventsOf("acme:regret"); len(evs) != 1 || evs[0] != "Job Canceled" {
		t.Fatalf("events of the job: %v, want one Job Canceled", evs)
	}
}

// TestResubmittingBeforeDispatchYieldsOneJob: the same job_id twice before
// dispatch is one job, leased once.
func TestResubmittingBeforeDispatchYieldsOneJob(t *testing.T) {
	t.Parallel()
	h := newManualHarness(t)
	token := h.register("w1", "gpu")
	for range 2 {
		r := h.do("POST", "/api/jobs", "op", map[string]any{"job_id": "twice", "tenant_id": "acme", "workflow_id": "wf-a"})
		h.want(r, 202, "")
		if r.body["job_id"] != "acme:twice" {
			t.Fatalf("submit answered %s", r.raw)
		}
	}
	h.dispatch()
	if l, r := h.poll(token); r.status != 200 || l.id != "acme:twice" {
		t.Fatalf("poll: %d %s", r.status, r.raw)
	}
	if _, r := h.poll(token); r.status != 204 {
		t.Fatalf("a second job was leased: %d %s", r.status, r.raw)
	}
	// Once filed, a resubmission is answered and not queued again.
	h.want(h.do("POST", "/api/jobs", "op", map[string]any{"job_id": "twice", "tenant_id": "acme", "workflow_id": "wf-a"}), 202, "")
	if n := h.dispatch(); n != 0 {
		t.Fatalf("a repeat of a filed job queued %d submissions", n)
	}
}

// TestAcceptedJobsKeepTheTenantBoundary: an accepted job of globex is not
// found by acme, whose cancel changes nothing, nor by a worker or nobody.
func TestAcceptedJobsKeepTheTenantBoundary(t *testing.T) {
	t.Parallel()
	h := newManualHarness(t)
	acmeKey, _ := h.createKey("acme", nil)
	globexKey, _ := h.createKey("globex", nil)
	h.want(h.do("POST", "/api/jobs", globexKey, map[string]any{"job_id": "render-1", "workflow_id": "wf-a"}), 202, "")
	none := h.do("GET", "/api/jobs/globex:nothing", acmeKey, nil)
	for _, p := range []string{"/api/jobs/globex:render-1", "/api/jobs/render-1"} {
		r := h.do("GET", p, acmeKey, nil)
		h.want(r, 404, "not_found")
		if strings.Contains(string(r.raw), "accepted") || len(r.raw) > len(none.raw)+20 {
			t.Fatalf("acme's GET %s tells something: %s (a missing job: %s)", p, r.raw, none.raw)
		}
		h.want(h.do("POST", p+"/cancel", acmeKey, nil), 404, "not_found")
	}
	worker := h.register("w1", "gpu")
	h.want(h.do("GET", "/api/jobs/globex:render-1", worker, nil), 401, "unauthenticated")
	h.want(h.do("GET", "/api/jobs/globex:render-1", "", nil), 401, "unauthenticated")
	h.want(h.do("POST", "/api/jobs/globex:render-1/cancel", "", nil), 401, "unauthenticated")
	h.want(h.do("GET", "/api/admin/jobs?status=accepted", acmeKey, nil), 403, "permission_denied")
	if j := h.do("GET", "/api/jobs/render-1", globexKey, nil); j.status != 200 || j.body["status"] != "accepted" {
		t.Fatalf("globex reads its accepted job: %d %s", j.status, j.raw)
	}
}

// TestEveryAcceptedIDIsDispatchedAndServed: at each length limit, the id
// the API accepts is the job dispatch files and the worker routes serve;
// one past the limit is refused at submit, and nothing is queued.
func TestEveryAcceptedIDIsDispatchedAndServed(t *testing.T) {
	t.Parallel()
	h := newManualHarness(t)
	token := h.register("w1", "gpu")
	longTenant := strings.Repeat("t", tenant.MaxIDLength)
	longKey := strings.Repeat("k", tenant.MaxJobKeyLength)
	for _, c := range []struct{ tenant, key string }{
		{"acme", longKey},
		{longTenant, longKey},
		{longTenant, longTenant + ":" + strings.Repeat("f", tenant.MaxJobKeyLength)}, // the full id itself
		{"acme", strings.Repeat("k", 126)},
	} {
		r := h.do("POST", "/api/jobs", "op", map[string]any{"job_id": c.key, "tenant_id": c.tenant, "workflow_id": "wf-a"})
		h.want(r, 202, "")
		id := r.body["job_id"].(string)
		if id != tenant.JobID(c.tenant, c.key) || len(id) > tenant.MaxJobIDLength {
			t.Fatalf("submit answered %q", id)
		}
		h.dispatch()
		if j := h.job(id); j["status"] != "queued" {
			t.Fatalf("job of %d characters after dispatch: %v", len(id), j["status"])
		}
		l, pr := h.poll(token)
		if pr.status != 200 || l.id != id {
			t.Fatalf("poll: %d %s", pr.status, pr.raw)
		}
		h.want(h.do("POST", "/api/worker/heartbeat", token, map[string]any{"job_id": l.id, "lease_token": l.token}), 200, "")
		h.want(h.do("POST", "/api/worker/complete", token, map[string]any{"job_id": l.id, "lease_token": l.token, "result": map[string]any{}}), 200, "")
	}
	if r := h.do("GET", "/api/admin/rejected", "op", nil); strings.Contains(string(r.raw), "longer") || strings.Contains(string(r.raw), "job_id") {
		t.Fatalf("dispatch rejected a submission: %s", r.raw)
	}
	for _, c := range []struct{ tenant, key string }{{"acme", longKey + "k"}, {longTenant, longTenant + ":" + longKey + "k"}} {
		h.want(h.do("POST", "/api/jobs", "op", map[string]any{"job_id": c.key, "tenant_id": c.tenant, "workflow_id": "wf-a"}), 400, "invalid_argument")
	}
	if n := h.dispatch(); n != 0 {
		t.Fatalf("refused submissions queued %d messages", n)
	}
	h.want(h.do("POST", "/api/worker/heartbeat", token, map[string]any{"job_id": strings.Repeat("j", tenant.MaxJobIDLength+1), "lease_token": "x"}), 400, "invalid_argument")
}
