package openapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/eta"
	"github.com/fleetq/fleetq/pkg/domain/wire/openapi"
)

func validator(t *testing.T) *openapi.Validator {
	t.Helper()
	v, err := openapi.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func exchange(method, path, auth, reqBody string, status int, body string) openapi.Exchange {
	r := httptest.NewRequest(method, "http://fleetq.test"+path, strings.NewReader(reqBody))
	r.Header.Set("Content-Type", "application/json")
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	h := http.Header{}
	if body != "" {
		h.Set("Content-Type", "application/json")
	}
	return openapi.Exchange{Request: r, RequestBody: []byte(reqBody), Status: status, Header: h, Body: []byte(body)}
}

const job = `{"job_id":"j1","tenant_id":"t","workflow_id":"wf","fleet_slug":"gpu","status":"succeeded","attempts":1,
"max_attempts":3,"preemptions":0,"priority":0,"created_at":"2025-01-02T03:04:05.000Z","updated_at":"2025-01-02T03:04:06.000Z",
"lease_expires_at":null,"worker_id":null,"result":{"ok":true},"error":null,"history":[{"at":"2025-01-02T03:04:05.000Z","to":"queued"}],"cost_usd":0.0125}`

func TestTheDocumentIsOpenAPI31AndLoads(t *testing.T) {
	doc, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Paths.Len() == 0 {
		t.Fatalf("openapi %q with %d paths", doc.OpenAPI, doc.Paths.Len())
	}
	ops := validator(t).Operations()
	found := false
	for _, op := range ops {
		if op.Method == "GET" && op.Path == "/api/jobs/{job_id}" {
			found = strings.Join(op.Schemes, ",") == "apiKey,awsSigV4,operatorToken"
		}
	}
	if !found {
		t.Fatalf("GET /api/jobs/{job_id} with the API key and both operator schemes missing from %v", ops)
	}
}

func TestCheckAcceptsExchangesTheDocumentDescribes(t *testing.T) {
	v := validator(t)
	for name, x := range map[string]openapi.Exchange{
		"job":       exchange("GET", "/api/jobs/j1", "Bearer op", "", 200, job),
		"submit":    exchange("POST", "/api/jobs", "Bearer op", `{"tenant_id":"t","workflow_id":"wf","input":{"a":1}}`, 202, `{"job_id":"j1","status":"accepted"}`),
		"no job":    exchange("POST", "/api/worker/poll", "Bearer w", "", 204, ""),
		"refused":   exchange("POST", "/api/jobs", "", `{"colour":"red"}`, 401, `{"error":{"code":"unauthenticated","message":"m"}}`),
		"sigv4":     exchange("POST", "/api/jobs/j1/cancel", "AWS4-HMAC-SHA256 Credential=AK/x", "{}", 200, `{"status":"canceled"}`),
		"no route":  exchange("GET", "/api/nothing", "", "", 404, `{"error":{"code":"not_found","message":"m"}}`),
		"no method": exchange("DELETE", "/api/jobs/j1", "Bearer op", "", 405, `{"error":{"code":"invalid_argument","message":"m"}}`),
	} {
		if err := v.Check(x); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCheckRefusesWhatTheDocumentDoesNotDescribe(t *testing.T) {
	v := validator(t)
	for name, c := range map[string]struct {
		x    openapi.Exchange
		want string
	}{
		"extra answer field":             {exchange("POST", "/api/jobs", "Bearer op", `{"tenant_id":"t","workflow_id":"wf"}`, 202, `{"job_id":"j1","status":"accepted","colour":"red"}`), "colour"},
		"missing answer field":           {exchange("GET", "/api/jobs/j1", "Bearer op", "", 200, strings.Replace(job, `"history":`, `"x_history":`, 1)), "history"},
		"undocumented status":            {exchange("GET", "/api/jobs/j1", "Bearer op", "", 418, `{"error":{"code":"internal","message":"m"}}`), "status is not supported"},
		"bad error body":                 {exchange("GET", "/api/jobs/j1", "Bearer op", "", 404, `{"error":{"code":"nope","message":"m"}}`), "nope"},
		"accepted without a credential":  {exchange("GET", "/api/jobs/j1", "", "", 200, job), "refuses the request"},
		"accepted a bad body":            {exchange("POST", "/api/jobs", "Bearer op", `{"tenant_id":"t"}`, 202, `{"job_id":"j1","status":"accepted"}`), "workflow_id"},
		"unknown path answered":          {exchange("GET", "/api/nothing", "", "", 200, `{}`), "not in the document"},
		"unknown path without error":     {exchange("GET", "/api/nothing", "", "", 404, `not found`), "without a JSON body"},
		"a refused request answered 5xx": {exchange("POST", "/api/jobs", "", `{}`, 503, `{"error":{"code":"unavailable","message":"m"}}`), "refuses the request"},
	} {
		err := v.Check(c.x)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", name, err, c.want)
		}
	}
}

// The transport hands the caller the whole answer and reports a mismatch.
func TestTransportReportsMismatches(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"job_id":"j1","status":"accepted","extra":1}`))
	}))
	defer srv.Close()
	var errs []error
	c := &http.Client{Transport: validator(t).Transport(nil, func(err error) { errs = append(errs, err) }, "/local/")}
	for _, path := range []string{"/api/jobs", "/local/events"} {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(`{"tenant_id":"t","workflow_id":"wf"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer op")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		buf := new(strings.Builder)
		_, _ = io.Copy(buf, res.Body)
		res.Body.Close()
		if !strings.Contains(buf.String(), `"extra":1`) {
			t.Fatalf("the caller got %q", buf.String())
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "extra") {
		t.Fatalf("reported %v, want one mismatch on /api/jobs only", errs)
	}
}

// The document names every code of what a job waits on and every basis of
// an estimate, and nothing else: a client can match on them.
func TestTheEstimateEnumsAreTheDomains(t *testing.T) {
	doc, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	enum := func(schema string) []string {
		var out []string
		for _, v := range doc.Components.Schemas[schema].Value.Enum {
			out = append(out, v.(string))
		}
		return out
	}
	var codes []string
	for _, c := range eta.Codes {
		codes = append(codes, string(c))
	}
	if got := enum("WaitingOnCode"); !slices.Equal(got, codes) {
		t.Errorf("WaitingOnCode enum %v, want eta.Codes %v", got, codes)
	}
	bases := []string{string(eta.BasisProjection), string(eta.BasisNoHistory), string(eta.BasisAtMaxUnknownRunTimes),
		string(eta.BasisAwaitingApproval), string(eta.BasisSpotShort), string(eta.BasisQueueTimeout), string(eta.BasisBeyondHorizon)}
	if got := enum("EstimateBasis"); !slices.Equal(got, bases) {
		t.Errorf("EstimateBasis enum %v, want %v", got, bases)
	}
}
