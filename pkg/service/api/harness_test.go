package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire/openapi"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

const stackConfig = `
stage: test
registration_limit: 10
fleets:
  - slug: gpu
    workflows: [wf-a, wf-b]
    instance_types: [g5.xlarge]
    accept_secret: true
    max_instances: 3
    worker_cap: 3
    lease_seconds: 60
    heartbeat_seconds: 10
    poll_seconds: 1
    retry:
      max_attempts: 2
      backoff: [1m]
  - slug: approval
    workflows: [wf-c]
    instance_types: [g5.xlarge]
    accept_secret: true
    require_approval: true
  - slug: empty
    instance_types: [g5.xlarge]
    accept_secret: true
`

const (
	fleetSecret   = "fleet-secret-for-tests"
	operatorToken = "operator-token-for-tests"
)

type harness struct {
	t     testing.TB
	stack *devstack.Stack
	http  *http.Client
	// dispatched is signaled each time dispatch has handled a batch of
	// submissions.
	dispatched <-chan struct{}
}

func newHarness(t testing.TB, mutate ...func(*devstack.Options)) *harness {
	t.Helper()
	cfg, err := fleetconfig.Parse("stack.yaml", []byte(stackConfig))
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for _, f := range cfg.Fleets {
		secrets[f.Slug] = secretOf(f.Slug)
	}
	o := devstack.Options{Addr: "127.0.0.1:0", Config: cfg, FleetSecrets: secrets, OperatorToken: operatorToken,
		Logger: slog.New(slog.DiscardHandler), VisibilityTimeout: 2 * time.Second, DynamoDBEndpoint: testenv.StackDynamoDB(t),
		// The scaler runs only when a test posts the schedule event.
		Fleet: devstack.FleetOptions{Tick: -1}}
	for _, m := range mutate {
		m(&o)
	}
	h := &harness{t: t, http: contractClient(t)}
	stack, err := devstack.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	h.stack, h.dispatched = stack, stack.Dispatched()
	return h
}

var contract = sync.OnceValues(openapi.NewValidator)

// contractClient is the tests' HTTP client: it checks every request and
// answer against the OpenAPI document and fails the test on a mismatch.
// The dev stack's own /local/ routes are not part of the API.
func contractClient(t testing.TB) *http.Client {
	t.Helper()
	v, err := contract()
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: v.Transport(nil, func(err error) {
		t.Errorf("contract: %v", err)
	}, "/local/")}
}

type reply struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// secretOf is a fleet's own secret in the tests' stack.
func secretOf(fleet string) string { return fleetSecret + "-" + fleet }

// do sends a request; auth is "" (none), "op" (operator token), "secret"
// (the secret of the body's fleet_slug, else gpu's) or a worker token.
func (h *harness) do(method, path, auth string, body any) reply {
	h.t.Helper()
	headers := map[string]string{}
	switch auth {
	case "":
	case "op":
		headers["Authorization"] = "Bearer " + operatorToken
	case "secret":
		m, _ := body.(map[string]any)
		fleet, _ := m["fleet_slug"].(string)
		if _, ok := h.stack.FleetSecrets[fleet]; !ok {
			fleet = "gpu" // a body without a known fleet: a valid secret, so the body is what is refused
		}
		headers["X-Fleet-Secret"] = secretOf(fleet)
	default:
		headers["Authorization"] = "Bearer " + auth
	}
	return h.send(method, path, headers, body)
}

// send sends a request with headers.
func (h *harness) send(method, path string, headers map[string]string, body any) reply {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, h.stack.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := reply{status: res.StatusCode, header: res.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			h.t.Fatalf("%s %s answered %d with a body that is not a JSON object: %q", method, path, res.StatusCode, raw)
		}
	}
	if res.StatusCode >= 400 {
		h.checkErrorShape(method, path, r)
	}
	return r
}

// page sends a console request without a session (the console answers
// HTML, checked against the contract by the client) and returns its status.
func (h *harness) page(method, path string) int {
	h.t.Helper()
	req, err := http.NewRequest(method, h.stack.URL+path, strings.NewReader("csrf=x"))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.ReadAll(res.Body)
	return res.StatusCode
}

// checkErrorShape enforces the protocol's error body on every non-2xx answer,
// and that no secret or token leaks into it.
func (h *harness) checkErrorShape(method, path string, r reply) {
	h.t.Helper()
	e, ok := r.body["error"].(map[string]any)
	if !ok || len(r.body) != 1 {
		h.t.Fatalf("%s %s: error body %s is not {\"error\": {...}}", method, path, r.raw)
	}
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	if code == "" || msg == "" || len(e) != 2 {
		h.t.Fatalf("%s %s: error body %s needs exactly code and message", method, path, r.raw)
	}
	for _, secret := range []string{fleetSecret, operatorToken, "fqw1.", "goroutine ", ".go:"} {
		if strings.Contains(string(r.raw), secret) {
			h.t.Fatalf("%s %s: error body leaks %q: %s", method, path, secret, r.raw)
		}
	}
}

func (h *harness) want(r reply, status int, code string) {
	h.t.Helper()
	if r.status != status {
		h.t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if code != "" {
		if got := r.body["error"].(map[string]any)["code"]; got != code {
			h.t.Fatalf("code %v, want %s: %s", got, code, r.raw)
		}
	}
}

func (h *harness) register(workerID, fleet string) string {
	h.t.Helper()
	r := h.do("POST", "/api/worker/register", "secret", map[string]any{"worker_id": workerID, "fleet_slug": fleet, "stage": "test", "max_concurrency": 2, "instance_id": "i-" + workerID})
	h.want(r, 201, "")
	return r.body["token"].(string)
}

// submit queues a job through POST /api/jobs and waits until dispatch has
// filed it (the job is accepted until then).
func (h *harness) submit(body map[string]any) string {
	h.t.Helper()
	r := h.do("POST", "/api/jobs", "op", body)
	h.want(r, 202, "")
	id := r.body["job_id"].(string)
	h.waitFor(func() bool { return h.filed(id, "op") }, "job "+id+" to be dispatched")
	return id
}

// filed reports whether dispatch has filed the job: it exists and is no
// longer accepted.
func (h *harness) filed(id, auth string) bool {
	h.t.Helper()
	r := h.do("GET", "/api/jobs/"+id, auth, nil)
	return r.status == 200 && r.body["status"] != "accepted"
}

// waitFor checks cond each time dispatch has handled submissions, until it
// holds.
func (h *harness) waitFor(cond func() bool, what string) {
	h.t.Helper()
	testenv.Eventually(h.t, what, h.dispatched, cond)
}

type lease struct{ id, token string }

func (h *harness) poll(token string) (lease, reply) {
	h.t.Helper()
	r := h.do("POST", "/api/worker/poll", token, map[string]any{"current_load": 0})
	if r.status != 200 {
		return lease{}, r
	}
	j := r.body["job"].(map[string]any)
	return lease{id: j["job_id"].(string), token: j["lease_token"].(string)}, r
}

func (h *harness) job(id string) map[string]any {
	h.t.Helper()
	r := h.do("GET", "/api/jobs/"+id, "op", nil)
	h.want(r, 200, "")
	return r.body
}
