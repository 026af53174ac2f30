package api_test

import (
	"strings"
	"testing"
)

// TestMalformedProducerKeysAreToldSo: a bearer credential on a producer
// route that is not an API key (no fqk1. prefix, a cut-off key) is told it
// is malformed and what a key looks like, in the protocol's error shape,
// and never that the route wants the operator's credential; nothing is
// queued. The wrong tenant, nobody and a worker's token are refused too.
func TestMalformedProducerKeysAreToldSo(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key, _ := h.createKey("acme", nil)
	bare := strings.TrimPrefix(key, "fqk1.")
	for _, bad := range []string{bare, "secret-from-the-console", "fqk1.nope", key[:len(key)-3]} {
		for _, rt := range []struct{ method, path string }{{"POST", "/api/jobs"}, {"GET", "/api/jobs/render-1"}, {"POST", "/api/uploads"}} {
			r := h.do(rt.method, rt.path, bad, map[string]any{"workflow_id": "wf-a", "filename": "a.bin"})
			h.want(r, 401, "unauthenticated")
			msg := r.body["error"].(map[string]any)["message"].(string)
			if !strings.Contains(msg, "malformed") || !strings.Contains(msg, "fqk1.") || strings.Contains(msg, "operator") {
				t.Errorf("%s %s with %.12q…: %s", rt.method, rt.path, bad, msg)
			}
			if strings.Contains(string(r.raw), bare) {
				t.Fatalf("the answer repeats the key: %s", r.raw)
			}
		}
	}
	// The operator's token and the key itself still work.
	h.want(h.do("GET", "/api/jobs/render-1", "op", nil), 404, "not_found")
	h.want(h.do("GET", "/api/jobs/render-1", key, nil), 404, "not_found")
	// Nobody is asked for a credential, a worker's token is no producer's.
	h.want(h.do("GET", "/api/jobs/render-1", "", nil), 401, "unauthenticated")
	worker := h.register("w-1", "gpu")
	h.want(h.do("GET", "/api/jobs/render-1", worker, nil), 401, "unauthenticated")
	if !h.submissionQueueEmpty() {
		t.Fatal("a refused submission was queued")
	}
}
