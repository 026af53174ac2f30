package api_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fleetq/fleetq/pkg/domain/submission"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

func TestJobLifecycleOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	token := h.register("w1", "gpu")
	if _, r := h.poll(token); r.status != 204 || len(r.raw) != 0 {
		t.Fatalf("poll with nothing queued = %d %q", r.status, r.raw)
	}
	id := h.submit(map[string]any{"tenant_id": "acme", "workflow_id": "wf-a", "priority": 3, "input": map[string]any{"seconds": 2}})
	if j := h.job(id); j["status"] != "queued" || j["fleet_slug"] != "gpu" || j["priority"].(float64) != 3 {
		t.Fatalf("queued job = %v", j)
	}
	l, r := h.poll(token)
	if r.status != 200 || l.id != id {
		t.Fatalf("poll = %d %s", r.status, r.raw)
	}
	pj := r.body["job"].(map[string]any)
	if pj["attempt"].(float64) != 1 || pj["tenant_id"] != "acme" || pj["workflow_id"] != "wf-a" || pj["input"].(map[string]any)["seconds"].(float64) != 2 {
		t.Fatalf("leased job payload = %s", r.raw)
	}
	if _, err := time.Parse(time.RFC3339, pj["lease_expires_at"].(string)); err != nil {
		t.Fatalf("lease_expires_at is not RFC 3339: %v", err)
	}
	if j := h.job(id); j["status"] != "leased" || j["worker_id"] != "w1" {
		t.Fatalf("leased job = %v", j)
	}
	hb := h.do("POST", "/api/worker/heartbeat", token, map[string]any{"job_id": id, "lease_token": l.token, "progress": 0.5})
	h.want(hb, 200, "")
	if hb.body["cancel"] != false || hb.body["lease_expires_at"] == nil {
		t.Fatalf("heartbeat = %s", hb.raw)
	}
	done := map[string]any{"job_id": id, "lease_token": l.token, "result": map[string]any{"frames": 120}}
	c := h.do("POST", "/api/worker/complete", token, done)
	h.want(c, 200, "")
	if c.body["status"] != "succeeded" {
		t.Fatalf("complete = %s", c.raw)
	}
	h.want(h.do("POST", "/api/worker/complete", token, done), 200, "") // repeat: no-op
	j := h.job(id)
	if j["status"] != "succeeded" || j["attempts"].(float64) != 1 || j["result"].(map[string]any)["frames"].(float64) != 120 {
		t.Fatalf("finished job = %v", j)
	}
	if hist := j["history"].([]any); len(hist) != 3 {
		t.Fatalf("history = %v", hist)
	}
	h.want(h.do("POST", "/api/worker/complete", token, map[string]any{"job_id": id, "lease_token": "not-the-token"}), 409, "lease_lost")
}

func TestSameJobIDYieldsOneJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	body := map[string]any{"job_id": "scene-1:gen-1", "tenant_id": "acme", "workflow_id": "wf-a"}
	id := h.submit(body)
	first := h.job(id)
	h.want(h.do("POST", "/api/jobs", "op", body), 202, "")
	token := h.register("w1", "gpu")
	l, r := h.poll(token)
	if r.status != 200 || l.id != "acme:scene-1:gen-1" || id != l.id {
		t.Fatalf("poll = %d %s", r.status, r.raw)
	}
	// Once dispatch has consumed the duplicate, there is still one job.
	h.waitFor(h.submissionQueueEmpty, "dispatch to consume the duplicate")
	if _, r := h.poll(token); r.status != 204 {
		t.Fatalf("a second job was leased: %s", r.raw)
	}
	if h.job(id)["created_at"] != first["created_at"] {
		t.Fatal("the job was recreated")
	}
}

func TestRegisterErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	good := map[string]any{"worker_id": "w1", "fleet_slug": "gpu", "stage": "test"}
	h.want(h.do("POST", "/api/worker/register", "", good), 401, "unauthenticated")
	r := h.do("POST", "/api/worker/register", "wrong", good)
	h.want(r, 401, "unauthenticated")
	cases := []struct {
		body   any
		status int
		code   string
		msg    string
	}{
		{`{"worker_id":`, 400, "invalid_argument", "malformed JSON"},
		{map[string]any{"worker_id": "w1", "fleet_slug": "gpu", "stage": "test", "colour": "red"}, 400, "invalid_argument", `unknown field "colour"`},
		{map[string]any{"fleet_slug": "gpu", "stage": "test"}, 400, "invalid_argument", `"worker_id" is required`},
		{map[string]any{"worker_id": "w1", "fleet_slug": "gpu", "stage": "prod"}, 400, "invalid_argument", `this is stage "test"`},
		{map[string]any{"worker_id": "w1", "fleet_slug": "gpu", "stage": "test", "max_concurrency": 0}, 400, "invalid_argument", "max_concurrency"},
		{map[string]any{"worker_id": "w1", "fleet_slug": "nope", "stage": "test"}, 404, "not_found", `fleet "nope"`},
		{map[string]any{"worker_id": "w1", "fleet_slug": "empty", "stage": "test"}, 422, "no_workflows", "no workflow"},
		{map[string]any{"worker_id": "w1", "fleet_slug": "gpu", "stage": "test", "agent_key": "short"}, 400, "invalid_argument", `"agent_key"`},
	}
	for _, c := range cases {
		r := h.do("POST", "/api/worker/register", "secret", c.body)
		h.want(r, c.status, c.code)
		if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, c.msg) {
			t.Errorf("register %v: message %q does not contain %q", c.body, msg, c.msg)
		}
	}
}

// A second agent cannot take a live worker id: its registration is refused
// and the first agent's token goes on working; the same agent (same key)
// registers again.
func TestRegisterRefusesASecondAgentOnALiveWorkerID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	first := map[string]any{"worker_id": "w1", "fleet_slug": "gpu", "stage": "test", "agent_key": "agent-one-key-0123456789"}
	r := h.do("POST", "/api/worker/register", "secret", first)
	h.want(r, 201, "")
	token := r.body["token"].(string)
	second := map[string]any{"worker_id": "w1", "fleet_slug": "gpu", "stage": "test", "agent_key": "agent-two-key-0123456789"}
	r = h.do("POST", "/api/worker/register", "secret", second)
	h.want(r, 409, "conflict")
	if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "another agent") || !strings.Contains(msg, "--slot") {
		t.Fatalf("message %q does not say another agent holds the id and what to do", msg)
	}
	h.want(h.do("POST", "/api/worker/poll", token, map[string]any{}), 204, "")
	h.want(h.do("POST", "/api/worker/register", "secret", first), 201, "")
}

func TestRegisterCapAndReRegistration(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	t1 := h.register("w1", "gpu")
	h.register("w2", "gpu")
	h.register("w3", "gpu")
	h.want(h.do("POST", "/api/worker/register", "secret", map[string]any{"worker_id": "w4", "fleet_slug": "gpu", "stage": "test"}), 409, "fleet_full")
	// Re-registering an existing worker is not a new worker: it replaces the
	// token and keeps the leases.
	id := h.submit(map[string]any{"tenant_id": "t", "workflow_id": "wf-a"})
	l, _ := h.poll(t1)
	t1b := h.register("w1", "gpu")
	h.want(h.do("POST", "/api/worker/poll", t1, nil), 401, "unauthenticated")
	h.want(h.do("POST", "/api/worker/heartbeat", t1b, map[string]any{"job_id": id, "lease_token": l.token}), 200, "")
	if workers := h.do("GET", "/api/admin/workers?fleet=gpu", "op", nil).body["workers"].([]any); len(workers) != 3 {
		t.Fatalf("workers = %v", workers)
	}
}

func TestRegistrationRateLimit(t *testing.T) {
	t.Parallel()
	// The limit counts per minute: a fixed clock keeps all four attempts in one.
	h := newHarness(t, func(o *devstack.Options) {
		o.RegisterLimit = 3
		o.Clock = clock.NewFake(time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC))
	})
	for i := range 3 {
		// Failed attempts count too: the secret cannot be guessed at speed.
		auth := "secret"
		if i == 0 {
			auth = "wrong-secret"
		}
		h.do("POST", "/api/worker/register", auth, map[string]any{"worker_id": "w", "fleet_slug": "gpu", "stage": "test"})
	}
	r := h.do("POST", "/api/worker/register", "secret", map[string]any{"worker_id": "w9", "fleet_slug": "gpu", "stage": "test"})
	h.want(r, 429, "rate_limited")
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After = %q", ra)
	}
	if ws := h.do("GET", "/api/admin/workers?fleet=gpu", "op", nil).body["workers"].([]any); len(ws) != 1 {
		t.Fatalf("workers after the limit = %v", ws)
	}
}

func TestWorkerRouteErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	token := h.register("w1", "gpu")
	id := h.submit(map[string]any{"tenant_id": "t", "workflow_id": "wf-a"})
	l, _ := h.poll(token)
	before := h.job(id)

	h.want(h.do("POST", "/api/worker/poll", "", nil), 401, "unauthenticated")
	h.want(h.do("POST", "/api/worker/poll", "garbage", nil), 401, "unauthenticated")
	forged := strings.Join(append(strings.Split(token, ".")[:3], "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), ".")
	h.want(h.do("POST", "/api/worker/poll", forged, nil), 401, "unauthenticated")
	h.want(h.do("POST", "/api/worker/heartbeat", forged, map[string]any{"job_id": id, "lease_token": l.token}), 401, "unauthenticated")

	ref := map[string]any{"job_id": id, "lease_token": l.token}
	with := func(k string, v any) map[string]any {
		m := map[string]any{"job_id": id, "lease_token": l.token}
		m[k] = v
		return m
	}
	bad := []struct {
		path string
		body any
		msg  string
	}{
		{"/api/worker/poll", map[string]any{"current_load": -1}, "current_load"},
		{"/api/worker/poll", map[string]any{"load": 1}, `unknown field "load"`},
		{"/api/worker/heartbeat", map[string]any{"lease_token": l.token}, `"job_id" is required`},
		{"/api/worker/heartbeat", map[string]any{"job_id": id}, `"lease_token" is required`},
		{"/api/worker/heartbeat", with("progress", 1.5), "progress"},
		{"/api/worker/heartbeat", with("progress", "half"), `"progress": must be a number`},
		{"/api/worker/complete", with("result", []int{1}), `"result": must be a JSON object`},
		{"/api/worker/complete", "", "empty"},
		{"/api/worker/fail", ref, `"error.message" is required`},
		{"/api/worker/fail", with("error", map[string]any{"message": "x", "retryable": "yes"}), "retryable"},
		{"/api/worker/requeue", with("reason", "bored"), `reason "bored"`},
		{"/api/worker/requeue", ref, "reason"},
		{"/api/worker/deregister", map[string]any{"now": true}, `unknown field "now"`},
		{"/api/worker/unhealthy", map[string]any{}, `"reason" is required`},
		{"/api/worker/unhealthy", map[string]any{"reason": strings.Repeat("x", 1025)}, "longer than 1024"},
	}
	for _, c := range bad {
		r := h.do("POST", c.path, token, c.body)
		h.want(r, 400, "invalid_argument")
		if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, c.msg) {
			t.Errorf("%s %v: message %q does not contain %q", c.path, c.body, msg, c.msg)
		}
	}
	big := `{"job_id":"` + id + `","lease_token":"` + l.token + `","result":{"x":"` + strings.Repeat("a", 300<<10) + `"}}`
	h.want(h.do("POST", "/api/worker/complete", token, big), 413, "invalid_argument")
	// Within the body limit but past the result's share of the job's record.
	overBudget := h.do("POST", "/api/worker/complete", token, with("result", map[string]any{"x": strings.Repeat("a", submission.MaxResultBytes)}))
	h.want(overBudget, 413, "invalid_argument")
	if msg := overBudget.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `field "result"`) {
		t.Errorf("result over its budget: message %q does not name the field", msg)
	}
	overInput := h.do("POST", "/api/jobs", "op", map[string]any{"tenant_id": "t1", "workflow_id": "wf-a", "input": map[string]any{"x": strings.Repeat("a", submission.MaxInputBytes)}})
	h.want(overInput, 413, "invalid_argument")
	if msg := overInput.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `field "input"`) {
		t.Errorf("input over its budget: message %q does not name the field", msg)
	}

	stale := map[string]any{"job_id": id, "lease_token": "0123456789abcdef0123456789abcdef"}
	h.want(h.do("POST", "/api/worker/heartbeat", token, stale), 409, "lease_lost")
	h.want(h.do("POST", "/api/worker/complete", token, stale), 409, "lease_lost")
	h.want(h.do("POST", "/api/worker/fail", token, map[string]any{"job_id": id, "lease_token": "x", "error": map[string]any{"message": "m"}}), 409, "lease_lost")
	h.want(h.do("POST", "/api/worker/requeue", token, map[string]any{"job_id": id, "lease_token": "x", "reason": "shutdown"}), 409, "lease_lost")
	h.want(h.do("POST", "/api/worker/complete", token, map[string]any{"job_id": "no-such-job", "lease_token": "x"}), 409, "lease_lost")

	after := h.job(id)
	for _, k := range []string{"status", "attempts", "updated_at", "lease_expires_at", "history"} {
		if strings.TrimSpace(toJSON(before[k])) != strings.TrimSpace(toJSON(after[k])) {
			t.Fatalf("bad requests changed %s: %v → %v", k, before[k], after[k])
		}
	}
	h.want(h.do("GET", "/api/worker/poll", token, nil), 405, "invalid_argument")
	h.want(h.do("POST", "/api/worker/nope", token, nil), 404, "not_found")
}

func TestFailRequeueAndDeadLetter(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	token := h.register("w1", "gpu")
	a := h.submit(map[string]any{"job_id": "a", "tenant_id": "t", "workflow_id": "wf-a"})
	l, _ := h.poll(token)
	r := h.do("POST", "/api/worker/fail", token, map[string]any{"job_id": a, "lease_token": l.token, "error": map[string]any{"message": "CUDA OOM", "code": "oom", "retryable": true}})
	h.want(r, 200, "")
	if r.body["status"] != "queued" || r.body["not_before"] == nil {
		t.Fatalf("retryable fail = %s", r.raw)
	}
	if _, again := h.poll(token); again.status != 204 {
		t.Fatalf("a job in backoff was leased: %s", again.raw)
	}

	b := h.submit(map[string]any{"job_id": "b", "tenant_id": "t", "workflow_id": "wf-b"})
	l, _ = h.poll(token)
	if l.id != b {
		t.Fatalf("leased %s, want b", l.id)
	}
	r = h.do("POST", "/api/worker/requeue", token, map[string]any{"job_id": b, "lease_token": l.token, "reason": "spot_interruption"})
	h.want(r, 200, "")
	if r.body["status"] != "queued" {
		t.Fatalf("requeue = %s", r.raw)
	}
	if j := h.job(b); j["attempts"].(float64) != 0 || j["preemptions"].(float64) != 1 {
		t.Fatalf("after requeue: %v", j)
	}
	l, _ = h.poll(token)
	r = h.do("POST", "/api/worker/fail", token, map[string]any{"job_id": b, "lease_token": l.token, "error": map[string]any{"message": "not a scene", "retryable": false}})
	if r.body["status"] != "dead" {
		t.Fatalf("non-retryable fail = %s", r.raw)
	}
	dead := h.do("GET", "/api/admin/jobs?status=dead&fleet=gpu", "op", nil)
	h.want(dead, 200, "")
	if js := dead.body["jobs"].([]any); len(js) != 1 || js[0].(map[string]any)["job_id"] != "t:b" {
		t.Fatalf("dead letters = %s", dead.raw)
	}
	h.want(h.do("POST", "/api/admin/jobs/t:b/retry", "op", nil), 200, "")
	if j := h.job("t:b"); j["status"] != "queued" || j["attempts"].(float64) != 0 {
		t.Fatalf("retried = %v", j)
	}
	h.want(h.do("POST", "/api/admin/jobs/t:b/retry", "op", nil), 409, "conflict")
	h.want(h.do("POST", "/api/admin/jobs/zzz/retry", "op", nil), 404, "not_found")
	h.want(h.do("GET", "/api/admin/jobs?status=exploded", "op", nil), 400, "invalid_argument")
	h.want(h.do("GET", "/api/admin/jobs?fleet=nope", "op", nil), 404, "not_found")
}

func TestProducerRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.want(h.do("POST", "/api/jobs", "", map[string]any{"tenant_id": "t", "workflow_id": "wf-a"}), 401, "unauthenticated")
	h.want(h.do("POST", "/api/jobs", "wrong-token", map[string]any{"tenant_id": "t", "workflow_id": "wf-a"}), 401, "unauthenticated")
	r := h.do("POST", "/api/jobs", "op", map[string]any{"job_id": "x1", "tenant_id": "t", "workflow_id": "unserved"})
	h.want(r, 400, "invalid_argument")
	h.want(h.do("POST", "/api/jobs", "op", map[string]any{"tenant_id": "t", "workflow_id": "wf-a", "priority": "high"}), 400, "invalid_argument")
	h.want(h.do("POST", "/api/jobs", "op", `{"tenant_id":"t","workflow_id":"wf-a"} trailing`), 400, "invalid_argument")
	h.want(h.do("GET", "/api/jobs/x1", "op", nil), 404, "not_found")
	h.want(h.do("GET", "/api/jobs/x1", "", nil), 401, "unauthenticated")

	q := h.submit(map[string]any{"job_id": "q", "tenant_id": "t", "workflow_id": "wf-a"})
	c := h.do("POST", "/api/jobs/"+q+"/cancel", "op", nil)
	h.want(c, 200, "")
	if c.body["status"] != "canceled" || h.job(q)["status"] != "canceled" {
		t.Fatalf("cancel queued = %s", c.raw)
	}
	h.want(h.do("POST", "/api/jobs/"+q+"/cancel", "op", nil), 200, "")

	token := h.register("w1", "gpu")
	l := h.submit(map[string]any{"job_id": "l", "tenant_id": "t", "workflow_id": "wf-a"})
	lease, _ := h.poll(token)
	h.want(h.do("POST", "/api/jobs/"+l+"/cancel", "op", nil), 200, "")
	hb := h.do("POST", "/api/worker/heartbeat", token, map[string]any{"job_id": l, "lease_token": lease.token})
	h.want(hb, 200, "")
	if hb.body["cancel"] != true {
		t.Fatalf("heartbeat after cancel = %s", hb.raw)
	}
	h.want(h.do("POST", "/api/worker/complete", token, map[string]any{"job_id": l, "lease_token": lease.token}), 409, "lease_lost")

	s := h.submit(map[string]any{"job_id": "s", "tenant_id": "t", "workflow_id": "wf-a"})
	lease, _ = h.poll(token)
	h.want(h.do("POST", "/api/worker/complete", token, map[string]any{"job_id": s, "lease_token": lease.token}), 200, "")
	h.want(h.do("POST", "/api/jobs/"+s+"/cancel", "op", nil), 409, "conflict")
	h.want(h.do("POST", "/api/jobs/none/cancel", "op", nil), 404, "not_found")

	rej := h.do("GET", "/api/admin/rejected", "op", nil)
	h.want(rej, 200, "")
}

func TestAdminWorkerActions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	token := h.register("w1", "approval")
	reg := h.do("POST", "/api/worker/register", "secret", map[string]any{"worker_id": "w1", "fleet_slug": "approval", "stage": "test"})
	if reg.body["approved"] != false {
		t.Fatalf("worker of an approval fleet registered approved: %s", reg.raw)
	}
	token = reg.body["token"].(string)
	h.submit(map[string]any{"job_id": "c1", "tenant_id": "t", "workflow_id": "wf-c"})
	if _, r := h.poll(token); r.status != 204 {
		t.Fatalf("an unapproved worker got a job: %s", r.raw)
	}
	h.want(h.do("POST", "/api/admin/workers/w1/approve", "op", nil), 200, "")
	if l, r := h.poll(token); r.status != 200 || l.id != "t:c1" {
		t.Fatalf("approved worker poll = %s", r.raw)
	}
	h.want(h.do("POST", "/api/admin/workers/w1/drain", "op", nil), 200, "")
	h.submit(map[string]any{"job_id": "c2", "tenant_id": "t", "workflow_id": "wf-c"})
	if _, r := h.poll(token); r.status != 204 {
		t.Fatalf("a draining worker got a job: %s", r.raw)
	}
	rot := h.do("POST", "/api/admin/workers/w1/rotate-token", "op", nil)
	h.want(rot, 200, "")
	newToken := rot.body["token"].(string)
	h.want(h.do("POST", "/api/worker/poll", token, nil), 401, "unauthenticated")
	h.want(h.do("POST", "/api/worker/poll", newToken, nil), 204, "")
	rev := h.do("POST", "/api/admin/workers/w1/revoke", "op", nil)
	h.want(rev, 200, "")
	if rev.body["worker"].(map[string]any)["status"] != "revoked" {
		t.Fatalf("revoke = %s", rev.raw)
	}
	h.want(h.do("POST", "/api/worker/poll", newToken, nil), 403, "permission_denied")
	if j := h.job("t:c1"); j["status"] != "queued" || j["preemptions"].(float64) != 1 {
		t.Fatalf("the revoked worker's lease was not given back: %v", j)
	}
	h.want(h.do("POST", "/api/admin/workers/ghost/approve", "op", nil), 404, "not_found")
	h.want(h.do("POST", "/api/admin/workers/w1/promote", "op", nil), 404, "not_found")
	h.want(h.do("GET", "/api/admin/workers", "", nil), 401, "unauthenticated")

	fl := h.do("GET", "/api/admin/fleets", "op", nil)
	h.want(fl, 200, "")
	fleets := fl.body["fleets"].([]any)
	if len(fleets) != 3 {
		t.Fatalf("fleets = %s", fl.raw)
	}
	ap := fleets[1].(map[string]any)
	if ap["fleet_slug"] != "approval" || ap["queued"].(float64) != 2 || ap["workers"].(float64) != 1 {
		t.Fatalf("approval fleet = %v", ap)
	}
}

func TestUnhealthyWorkerGivesBackLeasesAndTakesNoWork(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	token := h.register("w1", "gpu")
	id := h.submit(map[string]any{"tenant_id": "t", "workflow_id": "wf-a"})
	h.poll(token)
	r := h.do("POST", "/api/worker/unhealthy", token, map[string]any{"reason": "GPU 0 (00000000:00:1E.0): 4 uncorrectable ECC errors"})
	h.want(r, 200, "")
	if r.body["status"] != "unhealthy" {
		t.Fatalf("answer %s", r.raw)
	}
	j := h.job(id)
	if j["status"] != "queued" || j["attempts"].(float64) != 0 || j["preemptions"].(float64) != 1 {
		t.Fatalf("after unhealthy: %v", j)
	}
	if _, r := h.poll(token); r.status == 200 {
		t.Fatalf("an unhealthy worker leased %s", r.raw)
	}
	other := h.register("w2", "gpu")
	if l, r := h.poll(other); r.status != 200 || l.id != id {
		t.Fatalf("another worker could not take the job: %s", r.raw)
	}
}

func TestDeregisterRequeuesLeases(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	token := h.register("w1", "gpu")
	id := h.submit(map[string]any{"tenant_id": "t", "workflow_id": "wf-a"})
	h.poll(token)
	h.want(h.do("POST", "/api/worker/deregister", token, nil), 200, "")
	j := h.job(id)
	if j["status"] != "queued" || j["attempts"].(float64) != 0 || j["preemptions"].(float64) != 1 {
		t.Fatalf("after deregister: %v", j)
	}
	h.want(h.do("POST", "/api/worker/poll", token, nil), 401, "unauthenticated")
	other := h.register("w2", "gpu")
	if l, r := h.poll(other); r.status != 200 || l.id != id {
		t.Fatalf("another worker could not take the job: %s", r.raw)
	}
}

func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.want(h.do("GET", "/", "", nil), 404, "not_found")
	h.want(h.do("DELETE", "/api/jobs/x", "op", nil), 405, "invalid_argument")
	h.want(h.do("GET", "/api/admin/nothing", "op", nil), 404, "not_found")
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// submissionQueueEmpty reports whether every submission has been dispatched
// and deleted (none visible, none in flight).
func (h *harness) submissionQueueEmpty() bool {
	out, err := h.stack.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(h.stack.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, k := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		if n, _ := strconv.Atoi(out.Attributes[string(k)]); n != 0 {
			return false
		}
	}
	return true
}

// A transition's event reaches the bus once it is announced. The relay,
// which delivers again what it finds in the outbox (at least once, under
// the same id), is off, so that what the bus shows is the announcements.
func TestLifecycleEventsReachTheLocalBus(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *devstack.Options) { o.RelayInterval = -1 })
	id := h.submit(map[string]any{"job_id": "ev-1", "tenant_id": "t", "workflow_id": "wf-a"})
	token := h.register("w1", "gpu")
	l, _ := h.poll(token)
	h.want(h.do("POST", "/api/worker/fail", token, map[string]any{"job_id": id, "lease_token": l.token, "error": map[string]any{"code": "oom", "message": "out of memory"}}), 200, "")
	h.want(h.do("POST", "/api/admin/jobs/"+id+"/retry", "op", nil), 409, "conflict") // queued for retry, not dead
	h.want(h.do("POST", "/api/jobs/"+id+"/cancel", "op", nil), 200, "")

	r := h.do("GET", "/local/events/recent", "op", nil)
	h.want(r, 200, "")
	evs := r.body["events"].([]any)
	var types []string
	for _, e := range evs {
		ev := e.(map[string]any)
		if ev["source"] != "fleetq" || ev["detail"].(map[string]any)["job_id"] != id {
			t.Fatalf("event %v", ev)
		}
		types = append(types, ev["detail-type"].(string))
	}
	if strings.Join(types, ",") != "Job Failed,Job Canceled" {
		t.Fatalf("events %v, want the retry then the cancellation", types)
	}
	h.want(h.do("GET", "/local/events/recent", "", nil), 401, "unauthenticated")
	h.want(h.do("GET", "/local/events/recent?limit=0", "op", nil), 400, "invalid_argument")
}

// The GPU facts a worker registers (nvidia-smi's GPUs and the driver's
// CUDA version) are shown with it in the workers view.
func TestWorkersViewShowsCapabilities(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	caps := map[string]any{"cuda_version": "12.4", "gpus": []any{map[string]any{
		"index": 0, "name": "NVIDIA A10G", "uuid": "GPU-3b1d5b1e-8a5c-2f0e-9c4d-1f2a3b4c5d6e", "pci_bus_id": "00000000:00:1E.0",
		"driver_version": "550.127.05", "memory_mib": 23028, "ecc_uncorrected": 0,
	}}}
	h.want(h.do("POST", "/api/worker/register", "secret", map[string]any{"worker_id": "g1", "fleet_slug": "gpu", "stage": "test", "capabilities": caps}), 201, "")
	h.register("plain", "gpu")
	got := map[string]any{}
	for _, w := range h.do("GET", "/api/admin/workers?fleet=gpu", "op", nil).body["workers"].([]any) {
		w := w.(map[string]any)
		got[w["worker_id"].(string)] = w["capabilities"]
	}
	c, ok := got["g1"].(map[string]any)
	if !ok || c["cuda_version"] != "12.4" || c["gpus"].([]any)[0].(map[string]any)["name"] != "NVIDIA A10G" {
		t.Fatalf("g1's capabilities in the view: %v", got["g1"])
	}
	if v, present := got["plain"]; !present || v != nil {
		t.Fatalf("a worker without capabilities shows %v (present %v)", v, present)
	}
}
