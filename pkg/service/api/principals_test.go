package api_test

import (
	"strings"
	"testing"
)

// Principals the stage config does not name: whoever deployed the stack
// (it holds the operator policy, so API Gateway lets it onto the operator
// routes), a producer role of tenant initech and an on-call role.
const (
	deployerSession = "arn:aws:sts::123456789012:assumed-role/Admin/deployer"
	initechRole     = "arn:aws:iam::123456789012:role/initech-producer"
	initechSession  = "arn:aws:sts::123456789012:assumed-role/initech-producer/batch"
	oncallRole      = "arn:aws:iam::123456789012:role/oncall"
	oncallSession   = "arn:aws:sts::123456789012:assumed-role/oncall/bob"
)

// TestPrincipalsAreMappedWithoutADeploy: whoever deployed creates a
// tenant's API key and maps IAM principals to tenants (or to the
// operators) through the operator routes, and they act so from the next
// request on, with no change to the stage config; a removal holds at once.
// The routes refuse the wrong tenant, a worker and nobody, and never
// change what the config maps.
func TestPrincipalsAreMappedWithoutADeploy(t *testing.T) {
	t.Parallel()
	h := newTenantsHarness(t)
	h.submit(map[string]any{"job_id": "render-1", "tenant_id": "globex", "workflow_id": "wf-a"})
	errMsg := func(r reply) string { return r.body["error"].(map[string]any)["message"].(string) }

	// The deployer is on no list, yet may create a key: the operator
	// routes are its policy's.
	r := h.iam(deployerSession, "POST", "/api/admin/keys", map[string]any{"tenant_id": "initech"})
	h.want(r, 201, "")
	key := r.body["key"].(string)
	h.want(h.do("POST", "/api/jobs", key, map[string]any{"job_id": "by-key", "workflow_id": "wf-a"}), 202, "")

	// initech's role is refused, and told how to be let in.
	r = h.iam(initechSession, "POST", "/api/jobs", map[string]any{"workflow_id": "wf-a"})
	h.want(r, 403, "permission_denied")
	if msg := errMsg(r); !strings.Contains(msg, "fleetq tenants principals add") || !strings.Contains(msg, initechSession) {
		t.Fatalf("unmapped principal told %q", msg)
	}

	// Mapped, it acts for initech at once; mapping it again changes nothing.
	for range 2 {
		r = h.iam(deployerSession, "POST", "/api/admin/principals", map[string]any{"principal_arn": initechRole, "tenant_id": "initech"})
		h.want(r, 200, "")
	}
	if p := r.body["principal"].(map[string]any); p["tenant_id"] != "initech" || p["source"] != "table" || p["operator"] != false {
		t.Fatalf("mapped %s", r.raw)
	}
	sub := h.iam(initechSession, "POST", "/api/jobs", map[string]any{"job_id": "render-1", "workflow_id": "wf-a"})
	h.want(sub, 202, "")
	if sub.body["job_id"] != "initech:render-1" {
		t.Fatalf("initech's render-1 is %v", sub.body["job_id"])
	}
	// The wrong tenant: initech's principal sees nothing of globex's.
	h.want(h.iam(initechSession, "GET", "/api/jobs/globex:render-1", nil), 404, "not_found")
	h.want(h.iam(initechSession, "POST", "/api/jobs", map[string]any{"tenant_id": "globex", "workflow_id": "wf-a"}), 403, "permission_denied")

	// A principal acts for one tenant: not another's too, not one the
	// config maps, not the caller itself as a tenant's.
	h.want(h.iam(deployerSession, "POST", "/api/admin/principals", map[string]any{"principal_arn": initechRole, "tenant_id": "globex"}), 409, "conflict")
	h.want(h.iam(deployerSession, "POST", "/api/admin/principals", map[string]any{"principal_arn": initechRole, "operator": true}), 409, "conflict")
	r = h.iam(deployerSession, "POST", "/api/admin/principals", map[string]any{"principal_arn": globexRole, "tenant_id": "initech"})
	h.want(r, 409, "conflict")
	if !strings.Contains(errMsg(r), "stage config") {
		t.Fatalf("a config principal: %s", r.raw)
	}
	h.want(h.iam(deployerSession, "POST", "/api/admin/principals/remove", map[string]any{"principal_arn": globexRole}), 409, "conflict")
	h.want(h.iam(deployerSession, "POST", "/api/admin/principals", map[string]any{"principal_arn": "arn:aws:iam::123456789012:role/Admin", "tenant_id": "initech"}), 409, "conflict")
	for _, bad := range []map[string]any{
		{"principal_arn": "arn:aws:iam::123456789012:role/*", "tenant_id": "initech"},
		{"principal_arn": "initech-producer", "tenant_id": "initech"},
		{"principal_arn": oncallRole, "tenant_id": "Initech"},
		{"principal_arn": oncallRole},
		{"principal_arn": oncallRole, "tenant_id": "initech", "operator": true},
	} {
		h.want(h.iam(deployerSession, "POST", "/api/admin/principals", bad), 400, "invalid_argument")
	}

	// An on-call role mapped as an operator acts for every tenant.
	h.want(h.iam(deployerSession, "POST", "/api/admin/principals", map[string]any{"principal_arn": oncallRole, "operator": true}), 200, "")
	h.want(h.iam(oncallSession, "GET", "/api/jobs/globex:render-1", nil), 200, "")

	// The listing shows the config's and the table's.
	list := h.iam(deployerSession, "GET", "/api/admin/principals", nil)
	h.want(list, 200, "")
	for _, want := range []string{`"principal_arn":"` + acmeRole + `","tenant_id":"acme","operator":false,"source":"config"`, initechRole, oncallRole, `"source":"table"`} {
		if !strings.Contains(string(list.raw), want) {
			t.Fatalf("the listing lacks %s: %s", want, list.raw)
		}
	}

	// The wrong tenant, a tenant's key, a worker and nobody may not call
	// the principal routes.
	worker := h.register("w-principals", "gpu")
	for _, rt := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/admin/principals", map[string]any{"principal_arn": oncallRole, "tenant_id": "initech"}},
		{"GET", "/api/admin/principals", nil},
		{"POST", "/api/admin/principals/remove", map[string]any{"principal_arn": initechRole}},
	} {
		h.want(h.iam(initechSession, rt.method, rt.path, rt.body), 403, "permission_denied")
		h.want(h.iam(acmeSession, rt.method, rt.path, rt.body), 403, "permission_denied")
		h.want(h.do(rt.method, rt.path, key, rt.body), 403, "permission_denied")
		h.want(h.do(rt.method, rt.path, worker, rt.body), 401, "unauthenticated")
		h.want(h.do(rt.method, rt.path, "", rt.body), 401, "unauthenticated")
		h.want(h.iam("", rt.method, rt.path, rt.body), 401, "unauthenticated")
	}

	// Removed: refused from the next request on; removing again is 404.
	h.want(h.iam(deployerSession, "POST", "/api/admin/principals/remove", map[string]any{"principal_arn": "arn:aws:iam::123456789012:role/path/INITECH-producer"}), 200, "")
	h.want(h.iam(initechSession, "GET", "/api/jobs/render-1", nil), 403, "permission_denied")
	h.want(h.iam(deployerSession, "POST", "/api/admin/principals/remove", map[string]any{"principal_arn": initechRole}), 404, "not_found")
	// The job it submitted is still initech's, read with initech's key.
	h.want(h.do("GET", "/api/jobs/render-1", key, nil), 200, "")
}
