package api_test

import (
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

func TestSubmitOverTheTenantCapAnswers429AndQueuesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *devstack.Options) {
		o.Config.Tenants = []fleetconfig.Tenant{{ID: "small", MaxQueued: 2}}
	})
	body := func(id, tenant string) map[string]any {
		return map[string]any{"job_id": id, "tenant_id": tenant, "workflow_id": "wf-a", "input": map[string]any{}}
	}
	a := h.submit(body("a", "small"))
	h.submit(body("b", "small"))
	// A repeat of an accepted job is not refused at the cap.
	h.want(h.do("POST", "/api/jobs", "op", body("a", "small")), 202, "")

	r := h.do("POST", "/api/jobs", "op", body("c", "small"))
	h.want(r, 429, "quota_exceeded")
	msg := r.body["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, "max_queued is 2") || !strings.Contains(msg, `"small"`) {
		t.Fatalf("message %q does not name the tenant and its cap", msg)
	}
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After = %q", ra)
	}
	h.waitFor(h.submissionQueueEmpty, "the submission queue to drain")
	h.want(h.do("GET", "/api/jobs/c", "op", nil), 404, "not_found")

	// Other tenants are not held back by it.
	h.submit(body("d", "other"))

	// A finished job frees its slot.
	h.want(h.do("POST", "/api/jobs/"+a+"/cancel", "op", nil), 200, "")
	h.submit(body("c", "small"))
	h.want(h.do("POST", "/api/jobs", "op", body("e", "small")), 429, "quota_exceeded")
}
