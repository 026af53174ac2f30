package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// The API of the previous release (git commit 72ed7cb, the last release
// before the fleets' own secrets and attestation) as far as a worker sees
// it: its request types, field for field as its pkg/domain/wire/worker.go
// declared them, and its decoding rule (pkg/lib/strictjson.Decode then):
// one JSON object, an empty body as {} where the route takes none, and an
// unknown field refused with 400 invalid_argument and the message
// `unknown field "<name>"`, the encoding/json decoder's name for it.
// Today's agent must register and work against it (docs/deploy.md,
// "Compatibility"): the recorded transcript of TestAgentSpeaksThePreviousRelease
// was recorded by later code, so only these types say what 72ed7cb accepts.

type prevRegisterRequest struct {
	WorkerID         string          `json:"worker_id"`
	FleetSlug        string          `json:"fleet_slug"`
	Stage            string          `json:"stage"`
	MaxConcurrency   *int            `json:"max_concurrency,omitempty"`
	InstanceID       string          `json:"instance_id,omitempty"`
	InstanceType     string          `json:"instance_type,omitempty"`
	AvailabilityZone string          `json:"availability_zone,omitempty"`
	PurchaseOption   string          `json:"purchase_option,omitempty"`
	Capabilities     json.RawMessage `json:"capabilities,omitempty"`
	Providers        []string        `json:"providers,omitempty"`
	AgentKey         string          `json:"agent_key,omitempty"`
	AgentVersion     string          `json:"agent_version,omitempty"`
}

type prevPollRequest struct {
	CurrentLoad *int `json:"current_load"`
}

type prevLeaseRef struct {
	JobID      string `json:"job_id"`
	LeaseToken string `json:"lease_token"`
}

type prevHeartbeatRequest struct {
	prevLeaseRef
	Progress    *float64 `json:"progress,omitempty"`
	RefreshURLs bool     `json:"refresh_urls,omitempty"`
}

type prevUnhealthyRequest struct {
	Reason string `json:"reason"`
}

type prevCompleteRequest struct {
	prevLeaseRef
	Result json.RawMessage `json:"result,omitempty"`
}

type prevFailError struct {
	Message   string `json:"message"`
	Retryable *bool  `json:"retryable"`
	Code      string `json:"code"`
}

type prevFailRequest struct {
	prevLeaseRef
	Error *prevFailError `json:"error"`
}

type prevRequeueRequest struct {
	prevLeaseRef
	Reason string `json:"reason"`
}

type prevEmpty struct{}

// prevRoutes are the worker routes of 72ed7cb and the body each decodes
// (whether it may be empty); it had no boot-report route.
func prevRoutes() map[string]func() (any, bool) {
	return map[string]func() (any, bool){
		wire.PathRegister:   func() (any, bool) { return new(prevRegisterRequest), false },
		wire.PathPoll:       func() (any, bool) { return new(prevPollRequest), true },
		wire.PathHeartbeat:  func() (any, bool) { return new(prevHeartbeatRequest), false },
		wire.PathComplete:   func() (any, bool) { return new(prevCompleteRequest), false },
		wire.PathFail:       func() (any, bool) { return new(prevFailRequest), false },
		wire.PathRequeue:    func() (any, bool) { return new(prevRequeueRequest), false },
		wire.PathDeregister: func() (any, bool) { return new(prevEmpty), true },
		wire.PathUnhealthy:  func() (any, bool) { return new(prevUnhealthyRequest), false },
	}
}

// prevDecode is 72ed7cb's strictjson.Decode as far as a well-formed body
// goes: an unknown field is named as the decoder names it.
func prevDecode(data []byte, v any, allowEmpty bool) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		if !allowEmpty {
			return errors.New("the body is empty; send a JSON object")
		}
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return errors.New("the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if rest, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return errors.New("unknown field " + rest)
		}
		return errors.New("malformed JSON: " + strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// prevAPI serves the worker routes with 72ed7cb's request types (or
// others a test gives), one job to lease, and records what it answered.
type prevAPI struct {
	t      *testing.T
	routes map[string]func() (any, bool)

	mu        sync.Mutex
	refused   []string // the messages of the 400s it answered
	paths     []string // the paths it answered 2xx
	leased    bool
	completed string // the job id completed
	reject    int    // how many polls to answer 401 (the token replaced)
	changed   chan struct{}
}

func newPrevAPI(t *testing.T, routes map[string]func() (any, bool)) (*prevAPI, *httptest.Server) {
	p := &prevAPI{t: t, routes: routes, changed: make(chan struct{}, 1)}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

func (p *prevAPI) answer(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if body != nil {
		_ = json.NewEncoder(w).Encode(body)
	}
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func (p *prevAPI) fail(w http.ResponseWriter, status int, code wire.Code, msg string) {
	p.answer(w, status, wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: msg}})
}

func (p *prevAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	defer p.mu.Unlock()
	route, ok := p.routes[r.URL.Path]
	if !ok || r.Method != http.MethodPost {
		p.fail(w, http.StatusNotFound, wire.CodeNotFound, "no such route")
		return
	}
	if r.URL.Path == wire.PathRegister {
		if r.Header.Get(wire.HeaderFleetSecret) != "the stage's secret" {
			p.fail(w, http.StatusUnauthorized, wire.CodeUnauthenticated, "the fleet secret is missing or wrong")
			return
		}
	} else if r.Header.Get("Authorization") != "Bearer the token" {
		p.fail(w, http.StatusUnauthorized, wire.CodeUnauthenticated, "the worker token is missing, malformed or replaced; register again")
		return
	}
	v, allowEmpty := route()
	if err := prevDecode(data, v, allowEmpty); err != nil {
		p.refused = append(p.refused, err.Error())
		p.fail(w, http.StatusBadRequest, wire.CodeInvalidArgument, err.Error())
		return
	}
	p.paths = append(p.paths, r.URL.Path)
	switch r.URL.Path {
	case wire.PathRegister:
		p.answer(w, http.StatusCreated, map[string]any{"worker_id": "w1", "token": "the token", "workflows_assigned": []string{"render"},
			"lease_seconds": 60, "heartbeat_seconds": 10, "poll_seconds": 1, "approved": true})
	case wire.PathPoll:
		switch {
		case p.reject > 0:
			p.reject--
			p.fail(w, http.StatusUnauthorized, wire.CodeUnauthenticated, "the worker token is missing, malformed or replaced; register again")
		case !p.leased:
			p.leased = true
			p.answer(w, http.StatusOK, map[string]any{"job": map[string]any{"job_id": "j1", "tenant_id": "t", "workflow_id": "render", "attempt": 1,
				"lease_token": "lt", "lease_expires_at": "2026-11-29T03:00:00.000Z", "input": map[string]any{"seconds": 0}, "input_urls": map[string]string{}, "output_url": ""}})
		default:
			p.answer(w, http.StatusNoContent, nil)
		}
	case wire.PathComplete:
		p.completed = v.(*prevCompleteRequest).JobID
		p.answer(w, http.StatusOK, map[string]string{"status": "succeeded"})
	default:
		p.answer(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

func (p *prevAPI) count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, q := range p.paths {
		if q == path {
			n++
		}
	}
	return n
}

// bootBeforeWarmup is the boot of a release between 72ed7cb and today that
// knew the boot's times but not the warm-up's end or a start from a pool.
type bootBeforeWarmup struct {
	LaunchedAt     string `json:"launched_at,omitempty"`
	AgentStartedAt string `json:"agent_started_at,omitempty"`
	RunnerReadyAt  string `json:"runner_ready_at,omitempty"`
}

type registerBeforeWarmup struct {
	prevRegisterRequest
	Boot *bootBeforeWarmup `json:"boot,omitempty"`
}

func beforeWarmup() map[string]func() (any, bool) {
	routes := prevRoutes()
	routes[wire.PathRegister] = func() (any, bool) { return new(registerBeforeWarmup), false }
	return routes
}

// An agent of today registers with the previous release's API, which
// refuses boot (and, in a release that knew boot but not the warm-up, its
// warmed_up_at and from_pool): it learns from each refusal which field the
// API does not know, registers without it, leases and completes a job, and
// leaves the field out of its next registration without being refused again.
func TestAgentWorksWithThePreviousReleaseAPI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		routes  map[string]func() (any, bool)
		refused []string
	}{
		{"72ed7cb", prevRoutes(), []string{`unknown field "boot"`}},
		{"boot before the warm-up", beforeWarmup(), []string{`unknown field "warmed_up_at"`, `unknown field "from_pool"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, srv := newPrevAPI(t, tc.routes)
			p.reject = 1 // after the job, the token is refused once: the agent registers again
			a, err := agent.New(agent.Config{API: srv.URL, FleetSecret: "the stage's secret", Fleet: "gpu", Stage: "test", WorkerID: "w1",
				Runner: agent.SleepRunner{}, Warmup: agent.Warmup{Input: json.RawMessage(`{"seconds": 0}`)},
				LaunchedAt: time.Now().Add(-time.Minute), FromPool: true, HTTP: srv.Client(),
				BackoffBase: time.Millisecond, BackoffMax: time.Millisecond,
				Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			testenv.Eventually(t, "the job completed and the worker registered twice", p.changed, func() bool {
				p.mu.Lock()
				completed := p.completed
				p.mu.Unlock()
				return completed == "j1" && p.count(wire.PathRegister) == 2
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("agent: %v", err)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if !reflect.DeepEqual(p.refused, tc.refused) {
				t.Errorf("the API refused %q, want %q (each new field once, then never again)", p.refused, tc.refused)
			}
		})
	}
}

// Every request field added to a worker route since the previous release
// is optional (omitted when empty): the agent can leave it out for an API
// that does not know it and mean the same as that release's agent did.
func TestFieldsAddedSinceThePreviousReleaseAreOptional(t *testing.T) {
	t.Parallel()
	today := map[string]any{
		wire.PathRegister: wire.RegisterRequest{}, wire.PathPoll: wire.PollRequest{}, wire.PathHeartbeat: wire.HeartbeatRequest{},
		wire.PathComplete: wire.CompleteRequest{}, wire.PathFail: wire.FailRequest{}, wire.PathRequeue: wire.RequeueRequest{},
		wire.PathDeregister: wire.Empty{}, wire.PathUnhealthy: wire.UnhealthyRequest{},
	}
	for path, route := range prevRoutes() {
		prev, _ := route()
		now, ok := today[path]
		if !ok {
			t.Errorf("%s: the previous release's route is not served today", path)
			continue
		}
		known := jsonFields(reflect.TypeOf(prev).Elem())
		for name, optional := range jsonFields(reflect.TypeOf(now)) {
			if _, old := known[name]; !old && !optional {
				t.Errorf("%s: %q was added since the previous release and is not omitempty", path, name)
			}
		}
	}
}

// jsonFields maps a struct's JSON names (embedded structs flattened) to
// whether each is omitempty.
func jsonFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = strings.Contains(opts, "omitempty")
	}
	return out
}
