package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/version"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// An agent of release N-1 works against the API of release N
// (docs/deploy.md, "Compatibility"). At each release the agent's whole
// protocol — registration, polls with and without a job, heartbeats, a
// cancel seen at a heartbeat, complete (twice), fail (retried and dead),
// requeue, a lost lease, unhealthy, deregistration, and the errors the
// agent acts on — is recorded as its worker client (pkg/service/agent)
// speaks it against that release's API on the dev stack, in
// pkg/domain/wire/testdata/release-<version>/agent-transcript.json.
// TestPreviousAgentTranscriptReplays sends every recorded request again to
// today's API and checks each answer is one that release's agent can read:
// the same status and error code, and every field the release answered
// still there with the same JSON type (and the same value for the fields
// an agent acts on: status, code, cancel). pkg/service/agent's
// TestAgentSpeaksThePreviousRelease checks the other direction.
//
// Record the transcript at release time, before tagging vX.Y.Z, with the
// other release fixtures (make release-fixtures VERSION=vX.Y.Z):
//
//	FLEETQ_RELEASE_FIXTURES=vX.Y.Z go test ./pkg/service/api -run TestPreviousAgentTranscriptReplays -count=1
//
// A release's transcript is never rewritten: if the replay fails, today's
// API broke the agents of that release still running on instances.

// transcriptDir holds the transcripts, beside the protocol's types.
const transcriptDir = "../../domain/wire/testdata"

// transcriptConfig is the stack the transcript is recorded on.
const transcriptConfig = `stage: test
fleets:
  - slug: gpu
    workflows: [wf-a]
    instance_types: [g5.xlarge]
    accept_secret: true
    max_instances: 3
    worker_cap: 5
    lease_seconds: 60
    heartbeat_seconds: 10
    poll_seconds: 1
    retry:
      max_attempts: 2
      backoff: [1h]
`

// recordingTransport keeps the last exchange it carried.
type recordingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	last testenv.Exchange
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := rt.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	out, _ := io.ReadAll(res.Body)
	res.Body = io.NopCloser(bytes.NewReader(out))
	rt.mu.Lock()
	rt.last = testenv.Exchange{Method: req.Method, Path: req.URL.Path, Request: compactJSON(body), Status: res.StatusCode, Response: compactJSON(out)}
	rt.mu.Unlock()
	return res, nil
}

func compactJSON(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return json.RawMessage(b)
	}
	return buf.Bytes()
}

// recorder runs the scenario with the agent's own client and keeps each exchange.
type recorder struct {
	t   *testing.T
	h   *harness
	ctx context.Context
	rt  *recordingTransport
	out []testenv.Exchange
	// clients are the agent clients by worker id.
	clients map[string]*agent.Client
}

func (r *recorder) client(worker string) *agent.Client {
	c, ok := r.clients[worker]
	if !ok {
		c = &agent.Client{API: r.h.stack.URL, HTTP: &http.Client{Transport: r.rt}}
		r.clients[worker] = c
	}
	return c
}

// agentCall runs one client call and records it.
func (r *recorder) agentCall(step, call, worker, auth string, f func(c *agent.Client) error) error {
	r.t.Helper()
	err := f(r.client(worker))
	ex := r.rt.last
	ex.Step, ex.Call, ex.Worker, ex.Auth = step, call, worker, auth
	r.out = append(r.out, ex)
	return err
}

// setup records an operator request the scenario needs (not the agent's).
func (r *recorder) setup(step, method, path string, body map[string]any) {
	r.t.Helper()
	var rep reply
	if method == "POST" && path == wire.PathJobs {
		id := r.h.submit(body)
		rep = reply{status: 202, raw: []byte(fmt.Sprintf(`{"job_id":%q,"status":"accepted"}`, id))}
	} else {
		rep = r.h.do(method, path, "op", body)
	}
	raw, _ := json.Marshal(body)
	if body == nil {
		raw = nil
	}
	if rep.status >= 300 {
		r.t.Fatalf("%s: %d %s", step, rep.status, rep.raw)
	}
	r.out = append(r.out, testenv.Exchange{Step: step, Auth: "operator", Method: method, Path: path, Request: compactJSON(raw), Status: rep.status, Response: compactJSON(rep.raw)})
}

func (r *recorder) must(err error, step string) {
	r.t.Helper()
	if err != nil {
		r.t.Fatalf("%s: %v", step, err)
	}
}

// recordAgentProtocol plays the agent's protocol through its client.
func recordAgentProtocol(t *testing.T, h *harness) []testenv.Exchange {
	rt := &recordingTransport{next: h.http.Transport}
	r := &recorder{t: t, h: h, ctx: context.Background(), rt: rt, clients: map[string]*agent.Client{}}
	ctx := r.ctx
	secret := map[string]string{wire.HeaderFleetSecret: secretOf("gpu")}
	two := 2
	reg := func(worker string) wire.RegisterRequest {
		return wire.RegisterRequest{WorkerID: worker, FleetSlug: "gpu", Stage: "test", MaxConcurrency: &two,
			InstanceID: "i-0" + worker, InstanceType: "g5.xlarge", AvailabilityZone: "us-east-1a", PurchaseOption: "spot",
			Capabilities: json.RawMessage(`{"gpus":[{"name":"NVIDIA A10G","memory_mib":23028,"driver_version":"550.54.15"}],"cuda_version":"12.4"}`),
			AgentKey:     "agent-key-of-" + worker + "-0123456789", AgentVersion: version.Get(),
			Boot: &wire.BootTimes{LaunchedAt: "2026-11-01T12:00:00Z", AgentStartedAt: "2026-11-01T12:01:10Z", RunnerReadyAt: "2026-11-01T12:01:40Z"}}
	}
	r.must(r.agentCall("register", "register", "w1", "fleet-secret", func(c *agent.Client) error {
		_, err := c.Register(ctx, secret, reg("w1"))
		return err
	}), "register")
	var lease *agent.Lease
	poll := func(step, worker string) *agent.Lease {
		r.t.Helper()
		var l *agent.Lease
		r.must(r.agentCall(step, "poll", worker, "worker", func(c *agent.Client) (err error) { l, err = c.Poll(ctx, 0); return err }), step)
		return l
	}
	if lease = poll("poll, nothing queued", "w1"); lease != nil {
		t.Fatalf("a poll of an empty queue leased %s", lease.JobID)
	}
	job := func(id string) map[string]any {
		return map[string]any{"job_id": id, "tenant_id": "t1", "workflow_id": "wf-a", "input": map[string]any{"prompt": "a lighthouse"}}
	}
	leaseOf := func(step, want string) *agent.Lease {
		r.t.Helper()
		l := poll(step, "w1")
		if l == nil || l.JobID != want {
			t.Fatalf("%s: leased %+v, want %s", step, l, want)
		}
		return l
	}
	progress := 0.5
	heartbeatURLs := func(step string, l *agent.Lease, token string, refresh bool) (wire.HeartbeatResponse, error) {
		var hb wire.HeartbeatResponse
		err := r.agentCall(step, "heartbeat", "w1", "worker", func(c *agent.Client) (err error) {
			hb, err = c.Heartbeat(ctx, l.JobID, token, &progress, refresh)
			return err
		})
		return hb, err
	}
	heartbeat := func(step string, l *agent.Lease, token string) (wire.HeartbeatResponse, error) {
		return heartbeatURLs(step, l, token, false)
	}

	// Success: lease, heartbeat, complete, complete again.
	r.setup("submit a job", "POST", wire.PathJobs, job("done"))
	lease = leaseOf("poll, a job", "t1:done")
	_, err := heartbeat("heartbeat", lease, lease.LeaseToken)
	r.must(err, "heartbeat")
	hb, err := heartbeatURLs("heartbeat asking for fresh URLs", lease, lease.LeaseToken, true)
	if err != nil || hb.LeaseURLs == nil || hb.OutputURL == "" {
		t.Fatalf("heartbeat asking for fresh URLs = %+v, %v", hb, err)
	}
	complete := func(step string, l *agent.Lease) error {
		return r.agentCall(step, "complete", "w1", "worker", func(c *agent.Client) error {
			return c.Complete(ctx, l.JobID, l.LeaseToken, json.RawMessage(`{"outputs":{"video":"s3://out/done.mp4"}}`))
		})
	}
	r.must(complete("complete", lease), "complete")
	r.must(complete("complete again (a retried call)", lease), "complete again")

	// A retryable failure, then a failure for good.
	fail := func(step string, l *agent.Lease, retryable bool) error {
		return r.agentCall(step, "fail", "w1", "worker", func(c *agent.Client) error {
			return c.Fail(ctx, l.JobID, l.LeaseToken, &agent.JobError{Message: "CUDA out of memory", Code: "cuda_oom", Retryable: retryable})
		})
	}
	r.setup("submit a job", "POST", wire.PathJobs, job("retried"))
	lease = leaseOf("poll, a job", "t1:retried")
	r.must(fail("fail, retryable", lease, true), "fail retryable")
	r.setup("submit a job", "POST", wire.PathJobs, job("dead"))
	lease = leaseOf("poll, a job", "t1:dead")
	r.must(fail("fail, not retryable", lease, false), "fail for good")

	// A preemption; the old lease is then lost; the job leased again is canceled.
	r.setup("submit a job", "POST", wire.PathJobs, job("preempted"))
	old := leaseOf("poll, a job", "t1:preempted")
	r.must(r.agentCall("requeue", "requeue", "w1", "worker", func(c *agent.Client) error {
		return c.Requeue(ctx, old.JobID, old.LeaseToken, "spot_interruption")
	}), "requeue")
	if _, err := heartbeat("heartbeat with a lost lease", old, old.LeaseToken); !isWireCode(err, 409, wire.CodeLeaseLost) {
		t.Fatalf("heartbeat of a requeued lease = %v, want 409 lease_lost", err)
	}
	lease = leaseOf("poll, the requeued job", "t1:preempted")
	r.setup("an operator cancels the job", "POST", "/api/jobs/t1:preempted/cancel", map[string]any{})
	hb, err = heartbeat("heartbeat of a canceled job", lease, lease.LeaseToken)
	if err != nil || !hb.Cancel {
		t.Fatalf("heartbeat of a canceled job = %+v, %v; want cancel", hb, err)
	}

	// A second worker reports its machine unhealthy; the first deregisters.
	r.must(r.agentCall("register a second worker", "register", "w2", "fleet-secret", func(c *agent.Client) error {
		_, err := c.Register(ctx, secret, reg("w2"))
		return err
	}), "register w2")
	r.must(r.agentCall("unhealthy", "unhealthy", "w2", "worker", func(c *agent.Client) error {
		return c.Unhealthy(ctx, "Xid 79: GPU has fallen off the bus")
	}), "unhealthy")
	r.must(r.agentCall("deregister", "deregister", "w1", "worker", func(c *agent.Client) error { return c.Deregister(ctx) }), "deregister")
	if err := r.agentCall("poll after deregistering", "poll", "w1", "worker", func(c *agent.Client) error { _, err := c.Poll(ctx, 0); return err }); !isWireCode(err, 401, wire.CodeUnauthenticated) {
		t.Fatalf("poll after deregistering = %v, want 401", err)
	}
	// Registration errors the agent acts on.
	bad := map[string]string{wire.HeaderFleetSecret: "not-the-secret"}
	if err := r.agentCall("register with a wrong secret", "register", "w3", "wrong-secret", func(c *agent.Client) error {
		_, err := c.Register(ctx, bad, reg("w3"))
		return err
	}); !isWireCode(err, 401, wire.CodeUnauthenticated) {
		t.Fatalf("register with a wrong secret = %v, want 401", err)
	}
	unknown := reg("w3")
	unknown.FleetSlug = "no-such-fleet"
	if err := r.agentCall("register to an unknown fleet", "register", "w3", "fleet-secret", func(c *agent.Client) error {
		_, err := c.Register(ctx, secret, unknown)
		return err
	}); !isWireCode(err, 404, wire.CodeNotFound) {
		t.Fatalf("register to an unknown fleet = %v, want 404", err)
	}
	return r.out
}

func isWireCode(err error, status int, code wire.Code) bool {
	var e *wire.Error
	return errors.As(err, &e) && e.Status == status && e.Code == code
}

// newHarnessConfig is the tests' stack on another config, each fleet
// with its own secret.
func newHarnessConfig(t *testing.T, config string) *harness {
	t.Helper()
	cfg, err := fleetconfig.Parse("transcript.yaml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	return newHarness(t, func(o *devstack.Options) {
		o.Config = cfg
		o.FleetSecrets = map[string]string{}
		for _, f := range cfg.Fleets {
			o.FleetSecrets[f.Slug] = secretOf(f.Slug)
		}
	})
}

func TestPreviousAgentTranscriptReplays(t *testing.T) {
	t.Parallel()
	if v := os.Getenv("FLEETQ_RELEASE_FIXTURES"); v != "" {
		writeTranscript(t, v)
		return
	}
	testenv.EachReleaseTranscript(t, transcriptDir, replayTranscript)
}

func writeTranscript(t *testing.T, v string) {
	dir := filepath.Join(transcriptDir, "release-"+v)
	if !testenv.ReleaseDir.MatchString(filepath.Base(dir)) {
		t.Fatalf("FLEETQ_RELEASE_FIXTURES=%q: a release version is vMAJOR.MINOR.PATCH", v)
	}
	if _, err := os.Stat(filepath.Join(dir, testenv.TranscriptFile)); err == nil {
		t.Fatalf("%s/agent-transcript.json exists: a release's transcript is never rewritten", dir)
	}
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = v // the agent of that release says so at registration
	h := newHarnessConfig(t, transcriptConfig)
	tr := testenv.Transcript{Version: v, Config: transcriptConfig, Exchanges: recordAgentProtocol(t, h)}
	raw, err := json.MarshalIndent(tr, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, testenv.TranscriptFile), append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d exchanges in %s", len(tr.Exchanges), dir)
}

// liveValues maps the values one run made up (tokens, lease tokens, the
// URLs signed for it) to another run's, learned answer by answer.
type liveValues map[string]string

// learn pairs the recorded answer's made-up strings with the live one's.
func (lv liveValues) learn(rec, live any) {
	switch r := rec.(type) {
	case map[string]any:
		l, _ := live.(map[string]any)
		for k, v := range r {
			if s, ok := v.(string); ok && (k == "token" || k == "lease_token") {
				if ls, ok := l[k].(string); ok {
					lv[s] = ls
				}
				continue
			}
			lv.learn(v, l[k])
		}
	case []any:
		l, _ := live.([]any)
		for i := range r {
			if i < len(l) {
				lv.learn(r[i], l[i])
			}
		}
	}
}

// rewrite replaces the recorded made-up strings in a request.
func (lv liveValues) rewrite(v any) any {
	switch x := v.(type) {
	case string:
		if s, ok := lv[x]; ok {
			return s
		}
	case map[string]any:
		for k, e := range x {
			x[k] = lv.rewrite(e)
		}
	case []any:
		for i, e := range x {
			x[i] = lv.rewrite(e)
		}
	}
	return v
}

// readable lists how a live answer differs from a recorded one in ways
// the recording release's agent would notice.
func readable(path string, rec, live any) []string {
	kind := func(v any) string {
		switch v.(type) {
		case nil:
			return "null"
		case map[string]any:
			return "object"
		case []any:
			return "array"
		case string:
			return "string"
		case float64:
			return "number"
		case bool:
			return "boolean"
		}
		return fmt.Sprintf("%T", v)
	}
	if rec == nil {
		return nil // the agent already copes with null here
	}
	if kind(rec) != kind(live) {
		return []string{fmt.Sprintf("%s: was %s, now %s", path, kind(rec), kind(live))}
	}
	var out []string
	switch r := rec.(type) {
	case map[string]any:
		l := live.(map[string]any)
		keys := make([]string, 0, len(r))
		for k := range r {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lvv, ok := l[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: missing", path, k))
				continue
			}
			switch k {
			case "status", "code", "cancel":
				if fmt.Sprint(r[k]) != fmt.Sprint(lvv) {
					out = append(out, fmt.Sprintf("%s.%s: was %v, now %v", path, k, r[k], lvv))
				}
			}
			out = append(out, readable(path+"."+k, r[k], lvv)...)
		}
	case []any:
		l := live.([]any)
		if len(r) > 0 && len(l) == 0 {
			out = append(out, fmt.Sprintf("%s: was %d items, now none", path, len(r)))
		}
		if len(r) > 0 && len(l) > 0 {
			out = append(out, readable(path+"[0]", r[0], l[0])...)
		}
	}
	return out
}

func decodeJSON(t *testing.T, raw []byte) any {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not JSON: %q", raw)
	}
	return v
}

func replayTranscript(t *testing.T, file string, tr testenv.Transcript) {
	if len(tr.Exchanges) == 0 {
		t.Fatalf("%s records no exchange", file)
	}
	h := newHarnessConfig(t, tr.Config)
	lv := liveValues{}
	tokens := map[string]string{}
	for i, ex := range tr.Exchanges {
		what := fmt.Sprintf("exchange %d (%s: %s %s)", i, ex.Step, ex.Method, ex.Path)
		body := lv.rewrite(decodeJSON(t, ex.Request))
		var live reply
		switch ex.Auth {
		case "operator":
			if ex.Method == "POST" && ex.Path == wire.PathJobs {
				h.submit(body.(map[string]any))
				continue
			}
			live = h.do(ex.Method, ex.Path, "op", body)
		case "fleet-secret", "wrong-secret":
			secret := secretOf("gpu")
			if ex.Auth == "wrong-secret" {
				secret = "not-the-secret"
			}
			live = h.send(ex.Method, ex.Path, map[string]string{wire.HeaderFleetSecret: secret}, body)
		case "worker":
			live = h.send(ex.Method, ex.Path, map[string]string{"Authorization": "Bearer " + tokens[ex.Worker]}, body)
		default:
			t.Fatalf("%s: unknown auth %q", what, ex.Auth)
		}
		if live.status != ex.Status {
			t.Fatalf("%s: today's API answers %d, the release answered %d\n  today: %s\n  then:  %s", what, live.status, ex.Status, live.raw, ex.Response)
		}
		rec := decodeJSON(t, ex.Response)
		got := decodeJSON(t, live.raw)
		if problems := readable("body", rec, got); len(problems) > 0 {
			t.Errorf("%s: the release's agent could not read today's answer:\n  %s\n  today: %s\n  then:  %s", what, strings.Join(problems, "\n  "), live.raw, ex.Response)
		}
		lv.learn(rec, got)
		if ex.Call == "register" && live.status == 201 {
			tokens[ex.Worker] = live.body["token"].(string)
		}
	}
}
