package api_test

import (
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/service/api"
)

// TestEveryBodyIsDecodedStrictly sends each route that takes a body a
// repeated key and, where its body has fields, a field name in the wrong
// case: both are refused with invalid_argument naming the key, before
// anything else about the request is looked at.
func TestEveryBodyIsDecodedStrictly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	token := h.register("w-strict", "gpu")
	// A field of each route's body, written in upper case.
	folded := map[string]string{
		"/api/worker/register":  "WORKER_ID",
		"/api/worker/poll":      "Current_Load",
		"/api/worker/heartbeat": "JOB_ID",
		"/api/worker/complete":  "Lease_Token",
		"/api/worker/fail":      "ERROR",
		"/api/worker/requeue":   "REASON",
		"/api/jobs":             "TENANT_ID",
		"/api/uploads":          "FileName",
	}
	credential := map[api.Auth]string{api.AuthFleetSecret: "secret", api.AuthWorker: token, api.AuthOperator: "op", api.AuthProducer: "op"}
	posts := 0
	for _, rt := range api.Routes() {
		if rt.Method != "POST" || rt.Auth == api.AuthConsole {
			continue // the console's forms are HTML forms, not JSON (pkg/service/console)
		}
		posts++
		path := strings.NewReplacer("{job_id}", "j-none", "{worker_id}", "w-strict", "{action}", "drain").Replace(rt.Pattern)
		auth := credential[rt.Auth]
		if auth == "" {
			t.Fatalf("route %s: no credential for %v", rt.Pattern, rt.Auth)
		}
		r := h.do("POST", path, auth, `{"k":1,"k":2}`)
		h.want(r, 400, "invalid_argument")
		if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `duplicate key "k"`) {
			t.Errorf("POST %s with a repeated key: %q", path, msg)
		}
		r = h.do("POST", path, auth, `{"input":{"a":{"b":1,"b":1}}}`)
		h.want(r, 400, "invalid_argument")
		if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `duplicate key "b" in "input.a"`) {
			t.Errorf("POST %s with a repeated nested key: %q", path, msg)
		}
		key, ok := folded[rt.Pattern]
		if !ok {
			continue // an empty body: any key is unknown, checked below
		}
		r = h.do("POST", path, auth, `{"`+key+`":"x"}`)
		h.want(r, 400, "invalid_argument")
		msg := r.body["error"].(map[string]any)["message"].(string)
		if !strings.Contains(msg, `unknown field "`+key+`"`) || !strings.Contains(msg, `did you mean "`+strings.ToLower(key)+`"`) {
			t.Errorf("POST %s with %q: %q", path, key, msg)
		}
	}
	if posts < len(folded) {
		t.Fatalf("only %d POST routes", posts)
	}
	// Bodies of the routes without fields refuse any key, whatever its case.
	r := h.do("POST", "/api/worker/deregister", token, `{"NOW":true}`)
	h.want(r, 400, "invalid_argument")
	// Nothing was changed by any of it: the worker still holds its registration.
	h.want(h.do("POST", "/api/worker/poll", token, map[string]any{"current_load": 0}), 204, "")
}
