package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An input nested past 32 levels is refused at submit with 400 naming the
// field, and nothing is queued; 32 levels are accepted.
func TestSubmitRefusesInputNestedPastDynamoDBsLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	deep := func(n int) map[string]any {
		in := map[string]any{"leaf": 1}
		for i := 1; i < n; i++ {
			in = map[string]any{"a": in}
		}
		return in
	}
	r := h.do("POST", "/api/jobs", "op", map[string]any{"job_id": "too-deep", "tenant_id": "t1", "workflow_id": "wf-a", "input": deep(33)})
	h.want(r, 400, "invalid_argument")
	if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `"input"`) || !strings.Contains(msg, "32") {
		t.Fatalf("message %q does not name the field and the limit", msg)
	}
	if !h.submissionQueueEmpty() {
		t.Fatal("a refused submission was queued")
	}
	h.submit(map[string]any{"job_id": "deep-enough", "tenant_id": "t1", "workflow_id": "wf-a", "input": deep(32)})
	if r := h.do("GET", "/api/jobs/too-deep", "op", nil); r.status != 404 {
		t.Fatalf("the refused job exists: %d %s", r.status, r.raw)
	}
}

// A body declared as something other than JSON in UTF-8 is refused with 400
// invalid_argument naming the Content-Type, on producer and worker routes;
// JSON with a UTF-8 charset, a +json type, or no Content-Type is read.
func TestBodiesMustBeDeclaredJSON(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	plain := &http.Client{Timeout: 30 * time.Second} // the contract only knows JSON bodies
	send := func(path, auth, ct, body string) reply {
		t.Helper()
		req, _ := http.NewRequest("POST", h.stack.URL+path, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		switch auth {
		case "op":
			req.Header.Set("Authorization", "Bearer "+operatorToken)
		case "secret":
			req.Header.Set("X-Fleet-Secret", secretOf("gpu"))
		}
		res, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		r := reply{status: res.StatusCode, header: res.Header, raw: raw}
		_ = json.Unmarshal(raw, &r.body)
		if r.status >= 400 {
			h.checkErrorShape("POST", path, r)
		}
		return r
	}
	submit := `{"tenant_id":"t1","workflow_id":"wf-a","input":{"n":1}}`
	register := `{"worker_id":"w-ct","fleet_slug":"gpu","stage":"test","max_concurrency":1,"instance_id":"i-ct"}`
	for _, c := range []struct{ ct, want string }{
		{"text/plain", `"text/plain" is not JSON`},
		{"application/x-www-form-urlencoded", `"application/x-www-form-urlencoded" is not JSON`},
		{"application/json; charset=iso-8859-1", `charset "iso-8859-1"`},
		{"application/json; =", "malformed"},
	} {
		for _, rt := range []struct{ path, auth, body string }{{"/api/jobs", "op", submit}, {"/api/worker/register", "secret", register}} {
			r := send(rt.path, rt.auth, c.ct, rt.body)
			h.want(r, 400, "invalid_argument")
			if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, c.want) {
				t.Errorf("%s with %q: message %q, want it to say %s", rt.path, c.ct, msg, c.want)
			}
		}
	}
	if !h.submissionQueueEmpty() {
		t.Fatal("a refused submission was queued")
	}
	for _, ct := range []string{"application/json; charset=UTF-8", "application/vnd.fleetq+json", ""} {
		if r := send("/api/jobs", "op", ct, submit); r.status != 202 {
			t.Errorf("Content-Type %q: %d %s", ct, r.status, r.raw)
		}
	}
}
