package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/lib/version"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

const stackConfig = `
stage: test
registration_limit: 100
fleets:
  - slug: gpu
    workflows: [render]
    instance_types: [g5.xlarge]
    accept_secret: true
    slots_per_instance: 2
    lease_seconds: 10
    heartbeat_seconds: 1
    poll_seconds: 1
`

type stackEnv struct {
	t     *testing.T
	ctx   context.Context
	stack *devstack.Stack
	clock *clock.Fake

	// changed is signaled each time an agent's request returns or an agent
	// logs: the moments the state a test waits for can change.
	changed chan struct{}
	mu      sync.Mutex
	paths   []string // the API paths agents called, in order
	logs    []string // the messages agents logged, in order
}

func (e *stackEnv) note(list *[]string, s string) {
	e.mu.Lock()
	*list = append(*list, s)
	e.mu.Unlock()
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

// calls counts the requests agents made to an API path.
func (e *stackEnv) calls(path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, p := range e.paths {
		if p == path {
			n++
		}
	}
	return n
}

// logged reports whether an agent logged a message starting with prefix.
func (e *stackEnv) logged(prefix string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.logs {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

// observed records every request an agent makes once its answer is back.
type observed struct {
	e    *stackEnv
	base http.RoundTripper
}

func (o observed) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := o.base.RoundTrip(r)
	o.e.note(&o.e.paths, r.URL.Path)
	return res, err
}

// logNotes records every message an agent logs.
type logNotes struct{ e *stackEnv }

func (h logNotes) Enabled(context.Context, slog.Level) bool { return true }
func (h logNotes) Handle(_ context.Context, r slog.Record) error {
	h.e.note(&h.e.logs, r.Message)
	return nil
}
func (h logNotes) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logNotes) WithGroup(string) slog.Handler      { return h }

func newStack(t *testing.T, fake bool) *stackEnv {
	t.Helper()
	cfg, err := fleetconfig.Parse("stack.yaml", []byte(stackConfig))
	if err != nil {
		t.Fatal(err)
	}
	o := devstack.Options{Addr: "127.0.0.1:0", Config: cfg, Logger: slog.New(slog.DiscardHandler),
		Fleet: devstack.FleetOptions{Tick: -1, NoLocalFleet: true}}
	e := &stackEnv{t: t, ctx: context.Background(), changed: make(chan struct{}, 1)}
	o.DynamoDBEndpoint = testenv.StackDynamoDB(t)
	if fake {
		e.clock = clock.NewFake(time.Now())
		o.Clock = e.clock
	}
	s, err := devstack.Start(e.ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	e.stack = s
	return e
}

// create stores a job directly (dispatch is tested elsewhere).
func (e *stackEnv) create(id string, input string) {
	e.t.Helper()
	if _, _, err := e.stack.Store.CreateJob(e.ctx, job.Spec{ID: id, TenantID: "t", WorkflowID: "render", Input: json.RawMessage(input)}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *stackEnv) job(id string) job.Job {
	e.t.Helper()
	j, err := e.stack.Store.GetJob(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// waitFor checks cond each time an agent's request returns or an agent
// logs, until it holds.
func (e *stackEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	testenv.Eventually(e.t, what, e.changed, cond)
}

// running is an agent running in the background.
type running struct {
	a    *agent.Agent
	done chan error
	stop context.CancelFunc
}

func (e *stackEnv) start(id string, r agent.Runner, mutate ...func(*agent.Config)) *running {
	e.t.Helper()
	c := agent.Config{API: e.stack.URL, FleetSecret: e.stack.FleetSecrets["gpu"], Fleet: "gpu", Stage: "test", WorkerID: id,
		InstanceID: "i-" + id, MaxConcurrency: 1, Runner: r, Clock: clock.Real{}, Logger: slog.New(logNotes{e}),
		HTTP:        &http.Client{Timeout: 30 * time.Second, Transport: observed{e, http.DefaultTransport}},
		BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
	for _, m := range mutate {
		m(&c)
	}
	a, err := agent.New(c)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	run := &running{a: a, done: make(chan error, 1), stop: cancel}
	go func() { run.done <- a.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-run.done })
	return run
}

func (r *running) wait(t *testing.T) error {
	t.Helper()
	err := testenv.Receive(t, "the agent to stop", r.done)
	r.done <- err // for the cleanup
	return err
}

// loopbackMetadata reads the fake IMDS at url without the SDK's IMDS
// client's timeouts (250 ms to connect, 500 ms to the answer's headers, 5 s
// in all), made for the instance's own service: a server in the test's
// process on a busy machine misses them, and a read the agent's fake clock
// was stepped for is not tried again until the clock moves on.
func loopbackMetadata(url string) *agent.Metadata {
	return agent.NewMetadata(url, func(o *imds.Options) { o.HTTPClient, o.DisableDefaultTimeout = &http.Client{}, true })
}

// fakeIMDS serves the IMDSv2 token and the metadata paths the agent reads.
type fakeIMDS struct {
	mu        sync.Mutex
	notice    bool
	rebalance bool
	target    string       // autoscaling/target-lifecycle-state ("": absent)
	pending   string       // the identity document's pendingTime ("": no document)
	targets   atomic.Int32 // reads of it
	v1        atomic.Int32 // requests without a token
}

func (f *fakeIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
		if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
			http.Error(w, "missing ttl", http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
		_, _ = w.Write([]byte("token-abc"))
		return
	}
	if r.Header.Get("X-aws-ec2-metadata-token") != "token-abc" {
		f.v1.Add(1)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch strings.TrimPrefix(r.URL.Path, "/latest/meta-data/") {
	case "instance-id":
		_, _ = w.Write([]byte("i-0spot"))
	case "instance-type":
		_, _ = w.Write([]byte("g5.xlarge"))
	case "placement/availability-zone":
		_, _ = w.Write([]byte("us-east-1b"))
	case "instance-life-cycle":
		_, _ = w.Write([]byte("spot"))
	case "spot/instance-action":
		if !f.notice {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"action":"terminate","time":"2026-11-23T10:00:00Z"}`))
	case "/latest/dynamic/instance-identity/document":
		if f.pending == "" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"instanceId":"i-0spot","imageId":"ami-0123456789abcdef0","instanceType":"g5.xlarge","availabilityZone":"us-east-1b","region":"us-east-1","pendingTime":"` + f.pending + `"}`))
	case "autoscaling/target-lifecycle-state":
		f.targets.Add(1)
		if f.target == "" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(f.target))
	case "events/recommendations/rebalance":
		if !f.rebalance {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"noticeTime":"2026-11-23T09:58:00Z"}`))
	default:
		http.NotFound(w, r)
	}
}

func TestSleepJobSucceeds(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	e.create("j1", `{"seconds": 0.2}`)
	a := e.start("w1", agent.SleepRunner{})
	e.waitFor("j1 to succeed", func() bool { return e.job("j1").Status == job.Succeeded })
	if j := e.job("j1"); !strings.Contains(string(j.Result), `"slept_seconds":0.2`) {
		t.Fatalf("result %s", j.Result)
	}
	e.create("j2", `{"seconds": 0, "fail": "bad scene"}`)
	e.waitFor("j2 to die", func() bool { return e.job("j2").Status == job.Dead })
	if j := e.job("j2"); j.Error == nil || j.Error.Message != "bad scene" {
		t.Fatalf("j2 error %+v", j.Error)
	}
	// The agent reported its build at registration.
	if w, err := e.stack.Store.GetWorker(e.ctx, "w1"); err != nil || w.AgentVersion != version.Get() || w.AgentVersion == "" {
		t.Fatalf("worker w1 agent version %q (%v), want %q", w.AgentVersion, err, version.Get())
	}
	_ = a
}

// A Spot notice mid-job: the job is requeued with no attempt spent, the
// worker deregisters and the agent exits; another agent then finishes it.
func TestSpotNoticeRequeuesAndAnotherAgentFinishes(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	imds := &fakeIMDS{pending: "2026-11-23T09:50:00Z"}
	srv := httptest.NewServer(imds)
	defer srv.Close()
	md := loopbackMetadata(srv.URL)
	id, err := md.Identity(e.ctx)
	if err != nil || id.InstanceID != "i-0spot" || id.AZ != "us-east-1b" || id.PurchaseOption != "spot" || id.ImageID != "ami-0123456789abcdef0" ||
		!id.LaunchedAt.Equal(time.Date(2026, 11, 23, 9, 50, 0, 0, time.UTC)) {
		t.Fatalf("identity %+v, %v", id, err)
	}
	e.create("j1", `{"seconds": 1.5}`)
	a := e.start("spot", agent.SleepRunner{}, func(c *agent.Config) { c.Metadata, c.SpotPoll = md, 20*time.Millisecond })
	e.waitFor("j1 leased", func() bool { return e.job("j1").Status == job.Leased })
	imds.mu.Lock()
	imds.notice = true
	imds.mu.Unlock()
	start := time.Now()
	if err := a.wait(t); err != nil {
		t.Fatalf("agent: %v", err)
	}
	// The notice gives two minutes; the agent must be done well inside them.
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("shutdown took %s", took)
	}
	j := e.job("j1")
	if j.Status != job.Queued || j.Preemptions != 1 || j.Attempts != 0 || j.Reason != job.SpotInterruption.Reason() {
		t.Fatalf("after the notice: %s preemptions %d attempts %d reason %s", j.Status, j.Preemptions, j.Attempts, j.Reason)
	}
	if _, err := e.stack.Store.GetWorker(e.ctx, "spot"); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("the interrupted worker is still registered: %v", err)
	}
	if imds.v1.Load() != 0 {
		t.Fatalf("%d metadata requests without an IMDSv2 token", imds.v1.Load())
	}
	e.start("other", agent.SleepRunner{})
	e.waitFor("j1 to succeed elsewhere", func() bool { return e.job("j1").Status == job.Succeeded })
	if j := e.job("j1"); j.WorkerID != "other" || j.Preemptions != 1 {
		t.Fatalf("finished by %s with %d preemptions", j.WorkerID, j.Preemptions)
	}
}

// A rebalance recommendation stops leasing; the running job finishes. The
// agent runs on a fake clock, so the metadata watch, the poll interval and
// the job's sleep happen exactly when the test moves it.
func TestRebalanceStopsLeasingOnly(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	imds := &fakeIMDS{}
	srv := httptest.NewServer(imds)
	defer srv.Close()
	clk := clock.NewFake(time.Now())
	e.create("j1", `{"seconds": 30}`)
	a := e.start("rb", agent.SleepRunner{}, func(c *agent.Config) {
		c.Metadata, c.SpotPoll, c.Clock = loopbackMetadata(srv.URL), 500*time.Millisecond, clk
		c.MaxConcurrency = 2
	})
	// j1 leased, then an empty poll with a slot still free.
	e.waitFor("j1 leased and the next poll", func() bool { return e.calls("/api/worker/poll") == 2 })
	if j := e.job("j1"); j.Status != job.Leased {
		t.Fatalf("j1 is %s", j.Status)
	}
	// The metadata watch, j1's heartbeat and sleep, and the poll interval
	// (0.8-1.2s) wait on the clock.
	testenv.Waiters(t, clk, 4)
	imds.mu.Lock()
	imds.rebalance = true
	imds.mu.Unlock()
	clk.Advance(500 * time.Millisecond) // the watch only
	e.waitFor("the recommendation to be seen", func() bool { return e.logged("rebalance recommendation") })
	polls := e.calls("/api/worker/poll")
	e.create("j2", `{"seconds": 0}`)
	clk.Advance(time.Second) // the poll interval is over: no poll follows
	clk.Advance(30 * time.Second)
	e.waitFor("j1 to finish", func() bool { return e.job("j1").Status == job.Succeeded })
	a.a.Drain()
	if err := a.wait(t); err != nil {
		t.Fatal(err)
	}
	if n := e.calls("/api/worker/poll"); n != polls {
		t.Fatalf("%d polls after the recommendation", n-polls)
	}
	if j := e.job("j2"); j.Status != job.Queued || j.Attempts != 0 || j.WorkerID != "" {
		t.Fatalf("j2 after the recommendation: %s attempts %d worker %q", j.Status, j.Attempts, j.WorkerID)
	}
}

// On a fake clock shared by the stack and the agent: an empty poll waits
// its jittered interval (0.8-1.2 poll seconds) before the next, each
// heartbeat interval extends the lease, so a job runs far past its
// lease, and the job's sleep ends when the clock says.
func TestPollAndHeartbeatFollowTheClock(t *testing.T) {
	t.Parallel()
	e := newStack(t, true)
	a := e.start("hb", agent.SleepRunner{}, func(c *agent.Config) { c.Clock = e.clock })
	// Registered, polled once (nothing queued), now waiting for the clock.
	testenv.Waiters(t, e.clock, 1)
	if n := e.calls("/api/worker/poll"); n != 1 {
		t.Fatalf("%d polls before the clock moved", n)
	}
	e.create("j1", `{"seconds": 20}`)
	e.clock.Advance(700 * time.Millisecond)
	testenv.Waiters(t, e.clock, 1)
	if n := e.calls("/api/worker/poll"); n != 1 {
		t.Fatalf("polled again %d times before the poll interval", n-1)
	}
	if j := e.job("j1"); j.Status != job.Queued {
		t.Fatalf("j1 is %s before the second poll", j.Status)
	}
	e.clock.Advance(500 * time.Millisecond)
	e.waitFor("j1 leased", func() bool { return e.job("j1").Status == job.Leased })
	leasedAt := e.clock.Now()
	if j := e.job("j1"); j.LeaseExpiresAt.UnixMilli() != leasedAt.Add(10*time.Second).UnixMilli() {
		t.Fatalf("lease until %s, want %s", j.LeaseExpiresAt, leasedAt.Add(10*time.Second))
	}
	// The heartbeat ticker and the job's sleep.
	testenv.Waiters(t, e.clock, 2)
	for beat := 1; beat <= 15; beat++ {
		e.clock.Advance(time.Second)
		e.waitFor("heartbeat", func() bool { return e.calls("/api/worker/heartbeat") == beat })
		j := e.job("j1")
		if j.Status != job.Leased || j.WorkerID != "hb" || j.LeaseExpiresAt.UnixMilli() != e.clock.Now().Add(10*time.Second).UnixMilli() {
			t.Fatalf("after heartbeat %d at %s: %s by %s until %s", beat, e.clock.Now(), j.Status, j.WorkerID, j.LeaseExpiresAt)
		}
	}
	if n := e.calls("/api/worker/heartbeat"); n != 15 {
		t.Fatalf("%d heartbeats in 15 heartbeat intervals", n)
	}
	if j := e.job("j1"); j.Status != job.Leased {
		t.Fatalf("j1 ended before its 20 seconds: %s", j.Status)
	}
	e.clock.Advance(5 * time.Second)
	e.waitFor("j1 to succeed", func() bool { return e.job("j1").Status == job.Succeeded })
	if j := e.job("j1"); !strings.Contains(string(j.Result), `"slept_seconds":20`) || j.UpdatedAt.UnixMilli() != leasedAt.Add(20*time.Second).UnixMilli() {
		t.Fatalf("j1: %s finished %s, leased %s", j.Result, j.UpdatedAt, leasedAt)
	}
	// With the slot free the agent polls at once, then waits again.
	e.waitFor("the poll after the job", func() bool { return e.calls("/api/worker/poll") == 3 })
	testenv.Waiters(t, e.clock, 1)
	e.clock.Advance(1200 * time.Millisecond)
	e.waitFor("the next poll", func() bool { return e.calls("/api/worker/poll") == 4 })
	_ = a
}

// SIGTERM (Drain) with no drain timeout requeues the running job with
// reason shutdown and deregisters; with a timeout the job finishes first.
func TestDrain(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	e.create("long", `{"seconds": 30}`)
	a := e.start("d1", agent.SleepRunner{})
	e.waitFor("long leased", func() bool { return e.job("long").Status == job.Leased })
	a.a.Drain()
	if err := a.wait(t); err != nil {
		t.Fatal(err)
	}
	if j := e.job("long"); j.Status != job.Queued || j.Reason != job.Shutdown.Reason() || j.Attempts != 0 {
		t.Fatalf("long: %s %s attempts %d", j.Status, j.Reason, j.Attempts)
	}
	if _, err := e.stack.Store.GetWorker(e.ctx, "d1"); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("worker not deregistered: %v", err)
	}
	if _, err := e.stack.Store.Cancel(e.ctx, "long"); err != nil {
		t.Fatal(err)
	}

	e.create("short", `{"seconds": 0.5}`)
	b := e.start("d2", agent.SleepRunner{}, func(c *agent.Config) { c.DrainTimeout = 10 * time.Second })
	e.waitFor("short leased", func() bool { return e.job("short").Status == job.Leased })
	b.a.Drain()
	if err := b.wait(t); err != nil {
		t.Fatal(err)
	}
	if j := e.job("short"); j.Status != job.Succeeded {
		t.Fatalf("short: %s (%s)", j.Status, j.Reason)
	}
}

// An operator's cancel reaches the agent at its next heartbeat and stops the job.
func TestCancelStopsTheJob(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	e.create("c1", `{"seconds": 30}`)
	a := e.start("c", agent.SleepRunner{})
	e.waitFor("c1 leased", func() bool { return e.job("c1").Status == job.Leased })
	if _, err := e.stack.Store.Cancel(e.ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the job to stop", func() bool { return a.a.Running() == 0 })
	if j := e.job("c1"); j.Status != job.Canceled {
		t.Fatalf("c1 is %s", j.Status)
	}
}

// A lease that ran out and went to another worker: the first worker's next
// heartbeat is refused (409 lease_lost) and it stops the job without
// reporting anything.
func TestLeaseLostStopsTheJob(t *testing.T) {
	t.Parallel()
	e := newStack(t, true)
	e.create("l1", `{"seconds": 30}`)
	// The agent's clock is its own: it stands still while the stack's
	// runs past the lease, so no heartbeat of the first worker extends
	// the lease before the second takes the job over.
	agentClock := clock.NewFake(time.Now())
	a := e.start("first", agent.SleepRunner{}, func(c *agent.Config) { c.Clock = agentClock })
	e.waitFor("l1 leased", func() bool { return e.job("l1").Status == job.Leased })
	// The heartbeat and the job's sleep wait on the agent's clock.
	testenv.Waiters(t, agentClock, 2)
	// Time jumps past the lease; another worker takes the job over.
	e.clock.Advance(time.Minute)
	other := worker.Auth{WorkerID: "second", Fleet: "gpu", TokenHash: "h2"}
	if _, err := e.stack.Store.RegisterWorker(e.ctx, worker.Registration{WorkerID: "second", Fleet: "gpu", Stage: "test", MaxConcurrency: 1, TokenHash: "h2"}); err != nil {
		t.Fatal(err)
	}
	j, err := e.stack.Store.LeaseNext(e.ctx, other, []string{"render"})
	if err != nil || j.ID != "l1" {
		t.Fatalf("takeover: %+v, %v", j, err)
	}
	agentClock.Advance(time.Second) // the first worker's next heartbeat
	e.waitFor("the first agent to stop the job", func() bool { return a.a.Running() == 0 })
	if got := e.job("l1"); got.Status != job.Leased || got.WorkerID != "second" || got.LeaseToken != j.LeaseToken {
		t.Fatalf("l1 after the loss: %s by %s", got.Status, got.WorkerID)
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	for missing, c := range map[string]agent.Config{
		"API URL":      {FleetSecret: "s", Fleet: "f", Stage: "s", WorkerID: "w", Runner: agent.SleepRunner{}, Clock: clock.Real{}, Logger: log},
		"fleet secret": {API: "http://x", Fleet: "f", Stage: "s", WorkerID: "w", Runner: agent.SleepRunner{}, Clock: clock.Real{}, Logger: log},
		"fleet":        {API: "http://x", FleetSecret: "s", Stage: "s", WorkerID: "w", Runner: agent.SleepRunner{}, Clock: clock.Real{}, Logger: log},
		"runner":       {API: "http://x", FleetSecret: "s", Fleet: "f", Stage: "s", WorkerID: "w", Clock: clock.Real{}, Logger: log},
		"clock":        {API: "http://x", FleetSecret: "s", Fleet: "f", Stage: "s", WorkerID: "w", Runner: agent.SleepRunner{}, Logger: log},
		"logger":       {API: "http://x", FleetSecret: "s", Fleet: "f", Stage: "s", WorkerID: "w", Runner: agent.SleepRunner{}, Clock: clock.Real{}},
	} {
		if a, err := agent.New(c); err == nil || a != nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("without a %s: %v, %v", missing, a, err)
		}
	}
	if a, err := agent.New(agent.Config{API: "http://x", FleetSecret: "s", Fleet: "f", Stage: "s", WorkerID: "w",
		Runner: agent.SleepRunner{}, Clock: clock.Real{}, Logger: log}); err != nil || a == nil {
		t.Fatalf("with every required setting: %v, %v", a, err)
	}
}

// An instance being prepared for a warm pool is about to be stopped: its
// agent does not register (so it can lease nothing) until the instance is
// started from the pool and its target lifecycle state is InService. The
// agent runs on a fake clock, so each look at the metadata happens when
// the test moves it.
func TestNoRegistrationWhilePreparedForAWarmPool(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	imds := &fakeIMDS{target: "Warmed:Stopped"}
	srv := httptest.NewServer(imds)
	defer srv.Close()
	clk := clock.NewFake(time.Now())
	e.create("j1", `{"seconds": 0}`)
	marker := filepath.Join(t.TempDir(), "warm-pool-i-pooled")
	e.start("pooled", agent.SleepRunner{}, func(c *agent.Config) {
		c.Metadata, c.Clock, c.ReadyPoll = loopbackMetadata(srv.URL), clk, time.Second
		c.PoolMarker = marker
	})
	for range 3 {
		testenv.Waiters(t, clk, 1) // the agent waits for its next look
		clk.Advance(time.Second)
	}
	testenv.Waiters(t, clk, 1)
	if n, looks := e.calls("/api/worker/register"), imds.targets.Load(); n != 0 || looks < 4 {
		t.Fatalf("%d registrations after %d looks at a Warmed:Stopped instance", n, looks)
	}
	if !e.logged("instance is being prepared for a warm pool") {
		t.Fatal("the wait was not logged")
	}
	imds.mu.Lock()
	imds.target = "InService"
	poolStart := clk.Now().Add(2 * time.Second).Truncate(time.Second).UTC()
	imds.pending = poolStart.Format(time.RFC3339)
	imds.mu.Unlock()
	clk.Advance(time.Second)
	e.waitFor("j1 leased once the instance is in service", func() bool { return e.job("j1").Status != job.Queued })
	if n := e.calls("/api/worker/register"); n != 1 {
		t.Fatalf("%d registrations once in service", n)
	}
	// The agent lived on through the pool (a hibernated instance): its
	// boot starts at the start from the pool, the new pendingTime.
	if w, err := e.stack.Store.GetWorker(e.ctx, "pooled"); err != nil || !w.Boot.FromPool || !w.Boot.LaunchedAt.Equal(poolStart) ||
		!w.Boot.AgentStartedAt.IsZero() {
		t.Fatalf("boot %+v (%v): want a start from the pool at %s and nothing before it", w.Boot, err, poolStart)
	}
	// The marker stays on the instance's volume: an agent started after a
	// stop into the pool reports its start from the pool too.
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no pool marker: %v", err)
	}
	e.start("pooled-again", agent.SleepRunner{}, func(c *agent.Config) {
		c.PoolMarker, c.LaunchedAt = marker, time.Now().Add(-30*time.Second)
	})
	e.waitFor("the second registration", func() bool { return e.calls("/api/worker/register") == 2 })
	if w, err := e.stack.Store.GetWorker(e.ctx, "pooled-again"); err != nil || !w.Boot.FromPool || w.Boot.LaunchedAt.IsZero() || w.Boot.AgentStartedAt.IsZero() {
		t.Fatalf("boot %+v (%v): want a start from the pool, then the agent", w.Boot, err)
	}
}
