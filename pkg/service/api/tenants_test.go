package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	awsevents "github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

// The stage's IAM principals: acme's and globex's producer roles, an
// operator role, and a role the config does not know.
const (
	acmeRole     = "arn:aws:iam::123456789012:role/producers/acme-producer"
	acmeSession  = "arn:aws:sts::123456789012:assumed-role/acme-producer/render-box"
	globexRole   = "arn:aws:iam::123456789012:role/globex-producer"
	opsSession   = "arn:aws:sts::123456789012:assumed-role/fleetq-ops/alice"
	strangerRole = "arn:aws:sts::123456789012:assumed-role/someone-else/s"
)

const tenantsConfig = `
operators: ["arn:aws:iam::123456789012:role/fleetq-ops"]
tenants:
  - id: acme
    principals: ["` + acmeRole + `"]
  - id: globex
    principals: ["` + globexRole + `"]
`

// newTenantsHarness is a dev stack whose config maps IAM principals to
// tenants.
func newTenantsHarness(t *testing.T) *harness {
	t.Helper()
	cfg, err := fleetconfig.Parse("stack.yaml", []byte(stackConfig+tenantsConfig))
	if err != nil {
		t.Fatal(err)
	}
	return newHarness(t, func(o *devstack.Options) { o.Config = cfg })
}

// iam sends a request to the API as API Gateway's Lambda integration does,
// with arn as the identity its IAM authorizer verified ("" for none).
func (h *harness) iam(arn, method, path string, body any) reply {
	h.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			h.t.Fatal(err)
		}
	}
	rawPath, query, _ := strings.Cut(path, "?")
	req := awsevents.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: method + " " + rawPath, RawPath: rawPath, RawQueryString: query, Body: string(raw),
		Headers: map[string]string{"content-type": "application/json"},
		RequestContext: awsevents.APIGatewayV2HTTPRequestContext{
			HTTP: awsevents.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: rawPath, SourceIP: "198.51.100.20"},
		},
	}
	if arn != "" {
		req.RequestContext.Authorizer = &awsevents.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &awsevents.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccessKey: "ASIAEXAMPLE", AccountID: "123456789012", UserARN: arn},
		}
	}
	res, err := httpadapter.NewV2(h.stack.API).ProxyWithContext(context.Background(), req)
	if err != nil {
		h.t.Fatal(err)
	}
	r := reply{status: res.StatusCode, raw: []byte(res.Body)}
	if len(r.raw) > 0 {
		if err := json.Unmarshal(r.raw, &r.body); err != nil {
			h.t.Fatalf("%s %s answered %d with a body that is not a JSON object: %q", method, path, res.StatusCode, r.raw)
		}
	}
	if res.StatusCode >= 400 {
		h.checkErrorShape(method, path, r)
	}
	return r
}

// producerCall is one way to call the API as a producer.
type producerCall func(method, path string, body any) reply

// checkTenantBoundary runs every producer route as tenant acme against
// globex's job globex:render-1 (queued), and every operator route a tenant
// might try: acme reads, cancels, fetches the logs of, uploads into,
// retries, lists and takes the id of none of globex's work, and is told
// nothing about whether it exists.
func checkTenantBoundary(t *testing.T, h *harness, acme producerCall) {
	t.Helper()
	want := func(r reply, status int, code, what string) {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.raw)
		}
		if code != "" && r.body["error"].(map[string]any)["code"] != code {
			t.Fatalf("%s: %s, want code %s", what, r.raw, code)
		}
	}
	// globex's job, as acme names it either way, answers as a job that
	// does not exist.
	for _, id := range []string{"render-1", "globex:render-1"} {
		want(acme("GET", "/api/jobs/"+id, nil), 404, "not_found", "read globex's job as "+id)
		want(acme("GET", "/api/jobs/"+id+"/logs", nil), 404, "not_found", "logs of globex's job as "+id)
		want(acme("POST", "/api/jobs/"+id+"/cancel", nil), 404, "not_found", "cancel globex's job as "+id)
		want(acme("POST", "/api/admin/jobs/"+id+"/retry", nil), 403, "permission_denied", "retry as a tenant")
	}
	if j := h.job("globex:render-1"); j["status"] != "queued" {
		t.Fatalf("globex's job after acme's tries: %v", j)
	}
	none := acme("GET", "/api/jobs/no-such-job", nil)
	want(none, 404, "not_found", "read a job that does not exist")
	other := acme("GET", "/api/jobs/globex:render-1", nil)
	if strings.Replace(string(other.raw), "globex:render-1", "no-such-job", 1) != string(none.raw) {
		t.Fatalf("another tenant's job answers %s, a missing one %s: they must not differ", other.raw, none.raw)
	}

	// Listing, costs and the other operator routes are not a tenant's.
	for _, p := range []string{"/api/admin/jobs?status=queued", "/api/admin/costs", "/api/admin/fleets", "/api/admin/workers", "/api/admin/rejected"} {
		want(acme("GET", p, nil), 403, "permission_denied", "GET "+p+" as a tenant")
	}

	// Uploads go to acme's folder only.
	want(acme("POST", "/api/uploads", map[string]any{"tenant_id": "globex", "filename": "x.bin"}), 403, "permission_denied", "upload into globex's folder")
	want(acme("POST", "/api/uploads", map[string]any{"tenant_id": "ACME", "filename": "x.bin"}), 400, "invalid_argument", "upload as a case variant")
	up := acme("POST", "/api/uploads", map[string]any{"filename": "x.bin"})
	want(up, 200, "", "upload")
	if key := up.body["key"].(string); !strings.HasPrefix(key, "tenants/acme/uploads/") {
		t.Fatalf("upload key %s is not in acme's folder", key)
	}

	// Submissions act for acme only, read only acme's files, and globex's
	// job_id names acme's own job.
	want(acme("POST", "/api/jobs", map[string]any{"tenant_id": "globex", "workflow_id": "wf-a"}), 403, "permission_denied", "submit for globex")
	want(acme("POST", "/api/jobs", map[string]any{"tenant_id": "Acme", "workflow_id": "wf-a"}), 400, "invalid_argument", "submit as a case variant")
	want(acme("POST", "/api/jobs", map[string]any{"workflow_id": "wf-a", "input": map[string]any{"input_keys": map[string]any{"scene": "tenants/globex/uploads/secret.bin"}}}),
		400, "invalid_argument", "submit a job reading globex's upload")
	sub := acme("POST", "/api/jobs", map[string]any{"job_id": "render-1", "workflow_id": "wf-a", "input": map[string]any{"mine": true}})
	want(sub, 202, "", "submit with globex's job_id")
	if sub.body["job_id"] != "acme:render-1" {
		t.Fatalf("acme's render-1 is %v", sub.body["job_id"])
	}
	h.waitFor(func() bool { return acme("GET", "/api/jobs/render-1", nil).status == 200 }, "acme's render-1 to be dispatched")
	mine := acme("GET", "/api/jobs/render-1", nil)
	if mine.body["job_id"] != "acme:render-1" || mine.body["tenant_id"] != "acme" {
		t.Fatalf("acme reads %s as its render-1", mine.raw)
	}
	if j := h.job("globex:render-1"); j["tenant_id"] != "globex" {
		t.Fatalf("globex's job became %v", j)
	}
	want(acme("POST", "/api/jobs/acme:render-1/cancel", nil), 200, "", "cancel its own job")
}

func TestTenantBoundaryThroughIAM(t *testing.T) {
	t.Parallel()
	h := newTenantsHarness(t)
	h.submit(map[string]any{"job_id": "render-1", "tenant_id": "globex", "workflow_id": "wf-a", "input": map[string]any{"secret": 1}})
	checkTenantBoundary(t, h, func(method, path string, body any) reply { return h.iam(acmeSession, method, path, body) })

	// globex's own principal and the operator see globex's job.
	if r := h.iam(globexRole, "GET", "/api/jobs/render-1", nil); r.status != 200 || r.body["job_id"] != "globex:render-1" {
		t.Fatalf("globex reads its job: %d %s", r.status, r.raw)
	}
	if r := h.iam(opsSession, "GET", "/api/jobs/globex:render-1", nil); r.status != 200 {
		t.Fatalf("the operator reads globex's job: %d %s", r.status, r.raw)
	}
	if r := h.iam(opsSession, "POST", "/api/jobs", map[string]any{"tenant_id": "globex", "workflow_id": "wf-a", "job_id": "by-ops"}); r.status != 202 || r.body["job_id"] != "globex:by-ops" {
		t.Fatalf("the operator submits for globex: %d %s", r.status, r.raw)
	}
	// A principal the config does not map is refused, and told what to add.
	r := h.iam(strangerRole, "GET", "/api/jobs/globex:render-1", nil)
	if msg, _ := r.body["error"].(map[string]any)["message"].(string); r.status != 403 || !strings.Contains(msg, strangerRole) || !strings.Contains(msg, "principals") || !strings.Contains(msg, "operators") {
		t.Fatalf("unmapped principal: %d %s", r.status, r.raw)
	}
	// Nobody: no IAM identity and no credential.
	for _, rt := range []struct{ method, path string }{{"GET", "/api/jobs/globex:render-1"}, {"POST", "/api/jobs"}, {"POST", "/api/uploads"}, {"GET", "/api/admin/jobs"}} {
		if r := h.iam("", rt.method, rt.path, "{}"); r.status != 401 {
			t.Fatalf("%s %s without a credential: %d %s", rt.method, rt.path, r.status, r.raw)
		}
	}
}

// TestTenantIDsAreCanonical: a tenant id in any other spelling is refused
// with 400 and queues nothing, from the operator too.
func TestTenantIDsAreCanonical(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, id := range []string{"ACME", "Acme", "acme.", "acme ", "acmé", "ac_me", "-acme"} {
		r := h.do("POST", "/api/jobs", "op", map[string]any{"tenant_id": id, "workflow_id": "wf-a"})
		h.want(r, 400, "invalid_argument")
		if !bytes.Contains(r.raw, []byte("tenant_id")) {
			t.Fatalf("tenant %q: %s", id, r.raw)
		}
		h.want(h.do("POST", "/api/uploads", "op", map[string]any{"tenant_id": id, "filename": "a.bin"}), 400, "invalid_argument")
	}
	if !h.submissionQueueEmpty() {
		t.Fatal("a refused submission was queued")
	}
}

// createKey has the operator create an API key for a tenant.
func (h *harness) createKey(tenantID string, body map[string]any) (string, map[string]any) {
	h.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	body["tenant_id"] = tenantID
	r := h.do("POST", "/api/admin/keys", "op", body)
	h.want(r, 201, "")
	return r.body["key"].(string), r.body["api_key"].(map[string]any)
}

func TestTenantBoundaryThroughAPIKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acmeKey, _ := h.createKey("acme", nil)
	globexKey, _ := h.createKey("globex", nil)
	r := h.do("POST", "/api/jobs", globexKey, map[string]any{"job_id": "render-1", "workflow_id": "wf-a", "input": map[string]any{"secret": 1}})
	h.want(r, 202, "")
	if r.body["job_id"] != "globex:render-1" {
		t.Fatalf("globex's render-1 is %v", r.body["job_id"])
	}
	h.waitFor(func() bool { return h.filed("render-1", globexKey) }, "globex's job to be dispatched")

	checkTenantBoundary(t, h, func(method, path string, body any) reply { return h.do(method, path, acmeKey, body) })

	// The key management routes are the operator's.
	h.want(h.do("POST", "/api/admin/keys", acmeKey, map[string]any{"tenant_id": "acme"}), 403, "permission_denied")
	h.want(h.do("GET", "/api/admin/keys", acmeKey, nil), 403, "permission_denied")
	if r := h.do("GET", "/api/jobs/render-1", globexKey, nil); r.status != 200 || r.body["input"] != nil && r.body["tenant_id"] != "globex" {
		t.Fatalf("globex reads its job: %d %s", r.status, r.raw)
	}
	// Nobody.
	for _, p := range []string{"/api/jobs/globex:render-1", "/api/jobs/render-1/logs"} {
		h.want(h.do("GET", p, "", nil), 401, "unauthenticated")
	}
	h.want(h.do("POST", "/api/jobs", "", map[string]any{"workflow_id": "wf-a"}), 401, "unauthenticated")
	h.want(h.do("POST", "/api/admin/keys", "", map[string]any{"tenant_id": "acme"}), 401, "unauthenticated")
}

func TestAPIKeysAreShownOnceStoredHashedAndRefusedOnceRevokedOrExpired(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key, view := h.createKey("acme", map[string]any{"name": "render ci", "expires_in_seconds": 3600})
	id := view["key_id"].(string)
	if !strings.HasPrefix(key, "fqk1."+id+".") || view["prefix"] != "fqk1."+id || view["state"] != "active" || view["name"] != "render ci" || view["expires_at"] == nil {
		t.Fatalf("created %q as %v", key, view)
	}
	// The store keeps only the digest; listings never show the key.
	stored, err := h.stack.Store.GetAPIKey(context.Background(), id)
	if err != nil || stored.Hash == "" || strings.Contains(stored.Hash, key) || stored.Tenant != "acme" {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	list := h.do("GET", "/api/admin/keys?tenant=acme", "op", nil)
	h.want(list, 200, "")
	if bytes.Contains(list.raw, []byte(key)) || bytes.Contains(list.raw, []byte(strings.TrimPrefix(key, "fqk1."+id+"."))) {
		t.Fatalf("the listing shows the key: %s", list.raw)
	}
	if ks := list.body["keys"].([]any); len(ks) != 1 || ks[0].(map[string]any)["last_used_at"] != nil {
		t.Fatalf("acme's keys before any use: %s", list.raw)
	}
	h.want(h.do("GET", "/api/admin/keys?tenant=Acme", "op", nil), 400, "invalid_argument")
	h.want(h.do("POST", "/api/admin/keys", "op", map[string]any{"tenant_id": "ACME"}), 400, "invalid_argument")
	h.want(h.do("POST", "/api/admin/keys", "op", map[string]any{"tenant_id": "acme."}), 400, "invalid_argument")

	// A use is recorded.
	h.want(h.do("GET", "/api/jobs/nothing", key, nil), 404, "not_found")
	if k, _ := h.stack.Store.GetAPIKey(context.Background(), id); k.LastUsedMS == 0 {
		t.Fatal("the key's use was not recorded")
	}
	if ks := h.do("GET", "/api/admin/keys", "op", nil).body["keys"].([]any); len(ks) != 1 || ks[0].(map[string]any)["last_used_at"] == nil {
		t.Fatalf("keys after a use: %v", ks)
	}

	// A wrong secret under a real id, a malformed key and an unknown one are refused.
	forged := "fqk1." + id + "." + strings.Repeat("A", 43)
	for _, bad := range []string{forged, "fqk1.nope", "fqk1.aaaaaaaaaaaaaaaa." + strings.Repeat("A", 43)} {
		h.want(h.do("GET", "/api/jobs/nothing", bad, nil), 401, "unauthenticated")
	}

	// Revoked: refused at once, and revoking again changes nothing.
	rev := h.do("POST", "/api/admin/keys/"+id+"/revoke", "op", nil)
	h.want(rev, 200, "")
	if rev.body["api_key"].(map[string]any)["state"] != "revoked" {
		t.Fatalf("revoke = %s", rev.raw)
	}
	r := h.do("GET", "/api/jobs/nothing", key, nil)
	h.want(r, 401, "unauthenticated")
	if !bytes.Contains(r.raw, []byte("revoked")) {
		t.Fatalf("revoked key: %s", r.raw)
	}
	h.want(h.do("POST", "/api/jobs", key, map[string]any{"workflow_id": "wf-a"}), 401, "unauthenticated")
	h.want(h.do("POST", "/api/admin/keys/"+id+"/revoke", "op", nil), 200, "")
	h.want(h.do("POST", "/api/admin/keys/aaaaaaaaaaaaaaaa/revoke", "op", nil), 404, "not_found")
	h.want(h.do("POST", "/api/admin/keys/not-a-key/revoke", "op", nil), 404, "not_found")

	// Expired: a key whose expiry has passed is refused.
	expired, parsed := auth.NewAPIKey()
	past := time.Now().Add(-time.Minute).UnixMilli()
	if err := h.stack.Store.CreateAPIKey(context.Background(), tenant.APIKey{ID: parsed.ID, Tenant: "acme", Hash: parsed.Hash, CreatedMS: past - 1000, ExpiresMS: past}); err != nil {
		t.Fatal(err)
	}
	r = h.do("GET", "/api/jobs/nothing", expired, nil)
	h.want(r, 401, "unauthenticated")
	if !bytes.Contains(r.raw, []byte("expired")) {
		t.Fatalf("expired key: %s", r.raw)
	}
	if ks := h.do("GET", "/api/admin/keys?tenant=acme", "op", nil).body["keys"].([]any); len(ks) != 2 || ks[1].(map[string]any)["state"] != "expired" && ks[0].(map[string]any)["state"] != "expired" {
		t.Fatalf("keys: %v", ks)
	}
}
