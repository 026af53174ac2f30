package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/lib/version"
)

// Config configures an agent. API, Fleet, Stage, WorkerID, Runner, Clock,
// Logger and a way to register (Attest or FleetSecret) are required; every
// other field documents its default.
type Config struct {
	// API is the fleetq API's base URL. The worker registers by Attest
	// when set (on EC2: no secret on the instance), else with FleetSecret,
	// its fleet's own secret.
	API         string
	FleetSecret string
	Attest      *Attestation
	Fleet       string
	Stage       string
	WorkerID    string
	// InstanceID, InstanceType and AZ are registered with the worker (the
	// interruption function finds the worker by instance id).
	InstanceID, InstanceType, AZ string
	// PurchaseOption ("spot", "on-demand" or "") prices the worker's jobs.
	PurchaseOption string
	// LaunchedAt is when the instance launched or last started (the
	// instance identity document's pendingTime; a warm pool's start), the
	// first phase of the boot the agent reports; zero: unknown.
	LaunchedAt time.Time
	// FromPool says LaunchedAt is the instance's start from a warm pool (a
	// bridge): the boot reports it as pool_start instead of launch.
	FromPool bool
	// PoolMarker, when set, is a file the agent creates once it sees its
	// instance prepared for a warm pool; an agent that finds it at start
	// runs on an instance started from the pool (FromPool). It must be on
	// the instance's volume, which a stop keeps (fleetq worker: in the
	// state directory).
	PoolMarker string
	// ImageID is the machine's image (the AMI id on EC2), named in a boot
	// report; empty: unknown.
	ImageID string
	// AgentKey identifies this agent across restarts (kept on its disk):
	// the API refuses another agent's registration of a live worker id.
	// Empty: a random key for this process.
	AgentKey string
	// MaxConcurrency is how many jobs the worker runs at once (default 1).
	MaxConcurrency int
	// Runner runs the jobs.
	Runner Runner
	// Warmup is run once the runner is ready and before the worker
	// registers (none by default); a warm-up that fails makes the agent
	// give up on the machine (ErrUnhealthy), as a sick GPU does.
	Warmup Warmup
	// Metadata, when set, is polled every SpotPoll (default 5s) for Spot
	// interruption notices and rebalance recommendations.
	Metadata *Metadata
	SpotPoll time.Duration
	// DrainTimeout is how long Drain lets running jobs finish before it
	// requeues them (default 0: at once).
	DrainTimeout time.Duration
	// HTTP is the client of the API (default: one with a 60s timeout).
	HTTP *http.Client
	// Logger is the agent's log; each line names the worker and its fleet.
	Logger *slog.Logger
	// ReadyPoll is how often an unready runner is asked again (default 2s).
	ReadyPoll time.Duration
	// RunnerMissingAfter is how long the runner's program may be missing
	// from the machine before registration (ErrRunnerMissing) before the
	// agent sends a boot report saying so (default 1m).
	RunnerMissingAfter time.Duration
	// Backoff bounds the retry delay of registration and polling (default
	// 1s doubling up to 1m, jittered).
	BackoffBase, BackoffMax time.Duration
	// URLRefreshMargin: a heartbeat asks for fresh presigned URLs when the
	// job's output URLs expire within it (default: two heartbeats, at
	// least a minute).
	URLRefreshMargin time.Duration
	// LogTailBytes is how much of each attempt's runner output (stdout and
	// stderr) is kept and uploaded to the attempt's log URL: the end
	// (default DefaultLogTailBytes).
	LogTailBytes int
	// GPU, when set, reads the machine's GPUs at start (their facts go
	// into the worker's capabilities) and every HealthEvery; a sick GPU
	// makes the agent give up (ErrUnhealthy). A machine without nvidia-smi
	// has no GPU checks.
	GPU *NvidiaSMI
	// Xid, with GPU, is the kernel log read at start and every HealthEvery
	// for Xid events: a fatal one makes the GPU sick (nil: not read).
	Xid *XidLog
	// HealthEvery is how often the GPUs and the runner are checked while
	// the agent runs (default: 30s with a GPU, else 0: the runner is asked
	// only before each lease).
	HealthEvery time.Duration
	// UnhealthyAfter is how long the runner may stay unready once the agent
	// registered before it gives up (default 5m).
	UnhealthyAfter time.Duration
	// Clock paces every wait of the agent: readiness polls, backoff, lease
	// polls, heartbeats, the metadata watch and the drain timeout, and
	// tells the time presigned URLs are checked against (clock.Real{} on a
	// machine).
	Clock clock.Clock
}

// Attestation registers the worker by proving its instance: an
// sts:GetCallerIdentity request signed with the instance profile's
// credentials and sent to the API, which asks STS who signed it.
type Attestation struct {
	Credentials aws.CredentialsProvider
	// STSEndpoint is the STS endpoint the API forwards to (the region's:
	// attest.RegionalEndpoint), and Region the signature's region.
	STSEndpoint, Region string
}

// Agent is one worker.
type Agent struct {
	cfg    Config
	client *Client
	log    *slog.Logger

	stop chan job.PreemptReason // job.SpotInterruption or job.Shutdown

	mu      sync.Mutex
	jobs    map[string]*running
	freed   chan struct{}
	leasing atomic.Bool
	reg     wire.RegisterResponse
	wg      sync.WaitGroup
	health  health
	// startedAt, readyAt and warmedAt are when the agent started, when its
	// runner first answered ready and when its warm-up ended (reported at
	// registration).
	startedAt, readyAt, warmedAt time.Time
}

type running struct {
	lease    Lease
	cancel   context.CancelFunc
	settled  atomic.Bool  // someone has reported (or given up) this job's outcome
	progress atomic.Value // float64
	outputs  atomic.Pointer[outputURLs]
	log      *tail // the attempt's runner output
}

// outputURLs are a job's current output URLs and when they expire.
type outputURLs struct {
	main       string
	named      map[string]string
	log        string    // the attempt's log PUT
	validUntil time.Time // zero: no URLs, or an expiry the agent cannot read
}

func newOutputURLs(main string, named map[string]string, log string) *outputURLs {
	o := &outputURLs{main: main, named: named, log: log}
	for _, u := range append([]string{main}, sortedKeysValues(named)...) {
		if t, ok := presignedExpiry(u); ok && (o.validUntil.IsZero() || t.Before(o.validUntil)) {
			o.validUntil = t
		}
	}
	return o
}

// presignedExpiry reads a SigV4 presigned URL's expiry (X-Amz-Date plus
// X-Amz-Expires).
func presignedExpiry(raw string) (time.Time, bool) {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return time.Time{}, false
	}
	q := u.Query()
	signed, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		return time.Time{}, false
	}
	secs, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil {
		return time.Time{}, false
	}
	return signed.Add(time.Duration(secs) * time.Second), true
}

func sortedKeysValues(m map[string]string) []string {
	var out []string
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

// New checks the configuration and returns an agent.
func New(c Config) (*Agent, error) {
	switch {
	case c.API == "":
		return nil, errors.New("agent: no API URL")
	case c.FleetSecret == "" && c.Attest == nil:
		return nil, errors.New("agent: neither attestation nor a fleet secret to register with")
	case c.Attest != nil && (c.Attest.Credentials == nil || c.Attest.STSEndpoint == "" || c.Attest.Region == ""):
		return nil, errors.New("agent: attestation needs credentials, the STS endpoint and the region")
	case c.Fleet == "" || c.Stage == "" || c.WorkerID == "":
		return nil, errors.New("agent: fleet, stage and worker id are required")
	case c.Runner == nil:
		return nil, errors.New("agent: no runner")
	case c.Clock == nil:
		return nil, errors.New("agent: no clock")
	case c.Logger == nil:
		return nil, errors.New("agent: no logger")
	}
	if err := c.Warmup.check(); err != nil {
		return nil, err
	}
	if c.PoolMarker != "" {
		if _, err := os.Stat(c.PoolMarker); err == nil {
			c.FromPool = true
		}
	}
	if c.MaxConcurrency < 1 {
		c.MaxConcurrency = 1
	}
	if c.AgentKey == "" {
		c.AgentKey = NewAgentKey()
	}
	if c.SpotPoll <= 0 {
		c.SpotPoll = 5 * time.Second
	}
	if c.ReadyPoll <= 0 {
		c.ReadyPoll = 2 * time.Second
	}
	if c.RunnerMissingAfter <= 0 {
		c.RunnerMissingAfter = time.Minute
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = max(time.Minute, c.BackoffBase)
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{Timeout: 60 * time.Second}
	}
	if c.HealthEvery <= 0 && c.GPU != nil {
		c.HealthEvery = 30 * time.Second
	}
	if c.UnhealthyAfter <= 0 {
		c.UnhealthyAfter = 5 * time.Minute
	}
	log := c.Logger.With("worker_id", c.WorkerID, "fleet", c.Fleet)
	a := &Agent{
		cfg: c, client: &Client{API: c.API, HTTP: c.HTTP, Log: log}, log: log,
		stop: make(chan job.PreemptReason, 2), jobs: map[string]*running{}, freed: make(chan struct{}, 1),
	}
	a.leasing.Store(true)
	a.startedAt = c.Clock.Now()
	return a, nil
}

// SpotNotice tells the agent its machine is about to be reclaimed, as the
// instance metadata's spot/instance-action does: it requeues its running
// jobs, deregisters and returns from Run.
func (a *Agent) SpotNotice() { a.signal(job.SpotInterruption) }

// Drain asks the agent to shut down gracefully (what SIGTERM does): stop
// leasing, let running jobs finish within the drain timeout, requeue the
// rest, deregister, and return from Run.
func (a *Agent) Drain() { a.signal(job.Shutdown) }

func (a *Agent) signal(reason job.PreemptReason) {
	select {
	case a.stop <- reason:
	default:
	}
}

// Running is how many jobs the agent is running whose outcome is still
// its to report (a job being stopped after a cancel, a lost lease or a
// requeue no longer counts: its work is not lost with the machine).
func (a *Agent) Running() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.jobs {
		if !r.settled.Load() {
			n++
		}
	}
	return n
}

// slotsUsed is how many job goroutines are alive.
func (a *Agent) slotsUsed() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.jobs)
}

// Run runs the agent until Drain, a Spot notice, or ctx ends. Ending ctx is
// a hard stop, like the machine vanishing: running jobs are abandoned
// unreported (their leases expire, or the interruption function requeues
// them) and the worker does not deregister.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.inspectGPUs(ctx); err != nil {
		return err
	}
	if err := a.waitReady(ctx); err != nil {
		return nil
	}
	a.readyAt = a.cfg.Clock.Now()
	if err := a.warmUp(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return a.failedWarmup(ctx, err)
	}
	if a.cfg.Warmup.set() {
		a.warmedAt = a.cfg.Clock.Now()
	}
	if err := a.waitInService(ctx); err != nil {
		return nil
	}
	if err := a.register(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if a.cfg.Metadata != nil {
		go a.watchMetadata(ctx)
	}
	if a.cfg.HealthEvery > 0 {
		go a.watchHealth(ctx)
	}
	failures := 0
	for {
		select {
		case <-ctx.Done():
			a.abandon()
			return nil
		case reason := <-a.stop:
			return a.shutdown(ctx, reason)
		default:
		}
		if !a.leasing.Load() || a.slotsUsed() >= a.cfg.MaxConcurrency {
			a.wait(ctx, a.freed, 0) // a slot frees, or a stop arrives
			continue
		}
		if !a.readyToLease(ctx) {
			continue
		}
		lease, err := a.client.Poll(ctx, a.slotsUsed())
		switch {
		case err == nil && lease != nil:
			failures = 0
			a.start(ctx, *lease)
			continue
		case err == nil:
			failures = 0
			a.wait(ctx, nil, jitter(time.Duration(a.reg.PollSeconds)*time.Second))
		case ctx.Err() != nil:
			continue
		case isCode(err, http.StatusUnauthorized, ""):
			// The token stopped working (rotated, or the worker was removed):
			// register again and go on.
			a.log.Warn("worker token refused; registering again")
			if err := a.register(ctx); err != nil && ctx.Err() == nil {
				return err
			}
		case isCode(err, http.StatusForbidden, ""):
			// Revoked, unapproved or draining: nothing to lease for now.
			a.log.Info("not allowed to lease now", "reason", err.Error())
			a.wait(ctx, nil, jitter(time.Duration(max(a.reg.PollSeconds, 5))*time.Second))
		default:
			failures++
			a.log.Warn("poll failed", "error", err.Error())
			a.wait(ctx, nil, a.backoff(failures, err))
		}
	}
}

// wait blocks until d passes (0: no timeout), ch fires, a stop is asked or
// ctx ends; a stop is put back for the main loop. It answers whether ch fired.
func (a *Agent) wait(ctx context.Context, ch chan struct{}, d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := a.cfg.Clock.NewTimer(d)
		defer t.Stop()
		timer = t.Chan()
	}
	select {
	case <-ctx.Done():
	case reason := <-a.stop:
		a.signal(reason)
	case <-ch:
		return true
	case <-timer:
	}
	return false
}

func (a *Agent) waitReady(ctx context.Context) error {
	var missingSince time.Time
	reported := false
	for {
		err := a.cfg.Runner.Ready(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrRunnerMissing) {
			// The image lacks the runner's program: once that has lasted
			// RunnerMissingAfter (not a mount still coming up), say so on
			// the fleet, once. The agent goes on asking: a program that
			// appears later still gets the worker registered.
			now := a.cfg.Clock.Now()
			if missingSince.IsZero() {
				missingSince = now
			}
			if !reported && now.Sub(missingSince) >= a.cfg.RunnerMissingAfter {
				reported = true
				a.reportBoot(ctx, err)
			}
		} else {
			missingSince = time.Time{}
		}
		a.log.Info("runner not ready", "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case reason := <-a.stop:
			a.signal(reason)
			return errors.New("stopped before the runner was ready")
		case <-a.cfg.Clock.After(a.cfg.ReadyPoll):
		}
	}
}

// waitInService holds the registration while Auto Scaling prepares the
// instance for a warm pool (its target lifecycle state is Warmed:Stopped,
// Warmed:Hibernated or Warmed:Running): such an instance is about to be
// stopped, and a worker registered on it could lease a job the stop would
// take away. Once the instance is started from the pool its target state is
// InService and the agent (started again by systemd) registers. Without the
// metadata, or when it does not answer, the agent goes on.
func (a *Agent) waitInService(ctx context.Context) error {
	if a.cfg.Metadata == nil {
		return nil
	}
	waited := false
	for {
		state, ok, err := a.cfg.Metadata.TargetLifecycleState(ctx)
		if err != nil || !ok || !strings.HasPrefix(state, "Warmed:") {
			if waited {
				a.startedFromPool(ctx)
			}
			return nil
		}
		if !waited {
			a.log.Info("instance is being prepared for a warm pool; not registering", "target_lifecycle_state", state)
			waited = true
			if m := a.cfg.PoolMarker; m != "" {
				if err := os.WriteFile(m, []byte(state+"\n"), 0o600); err != nil {
					a.log.Warn("cannot mark the instance as pooled; its start from the pool will be reported as a launch", "error", err.Error())
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case reason := <-a.stop:
			a.signal(reason)
			return errors.New("stopped while the instance was prepared for a warm pool")
		case <-a.cfg.Clock.After(a.cfg.ReadyPoll):
		}
	}
}

// startedFromPool notes that the instance this agent waited on was just
// started from its warm pool (hibernated, or kept running, the agent lived
// on): its boot starts at that start, the instance's new pendingTime.
func (a *Agent) startedFromPool(ctx context.Context) {
	a.cfg.FromPool = true
	if id, err := a.cfg.Metadata.Identity(ctx); err == nil && !id.LaunchedAt.IsZero() {
		a.cfg.LaunchedAt = id.LaunchedAt
	} else {
		a.cfg.LaunchedAt = a.cfg.Clock.Now()
	}
}

// bootTimes are the instance's launch, the agent's start, the runner's
// readiness and the end of its warm-up as registration reports them
// (docs/scaling.md, "Cold start").
func (a *Agent) bootTimes() *wire.BootTimes {
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	b := &wire.BootTimes{AgentStartedAt: at(a.startedAt), RunnerReadyAt: at(a.readyAt), WarmedUpAt: at(a.warmedAt)}
	l := a.cfg.LaunchedAt
	switch {
	case l.IsZero():
	case !l.After(a.startedAt):
		b.LaunchedAt, b.FromPool = at(l), a.cfg.FromPool
	case a.cfg.FromPool:
		// Started from the pool after the agent started (a hibernated
		// instance resumed): what came before was the pool's preparation.
		return &wire.BootTimes{LaunchedAt: at(l), FromPool: true}
	}
	return b
}

// credentials are a registration's (and a boot report's) proof: a fresh
// attested identity (the API refuses old ones), else the fleet's secret.
func (a *Agent) credentials(ctx context.Context) (map[string]string, error) {
	at := a.cfg.Attest
	if at == nil {
		return map[string]string{wire.HeaderFleetSecret: a.cfg.FleetSecret}, nil
	}
	id, err := attest.Sign(ctx, at.Credentials, at.STSEndpoint, at.Region, a.cfg.Stage, a.cfg.Clock.Now())
	if err != nil {
		return nil, err
	}
	return map[string]string{wire.HeaderIdentity: wire.EncodeIdentity(id)}, nil
}

// bootReportTries bounds the attempts at a boot report: it is worth a few
// retries, not a machine kept waiting.
const bootReportTries = 3

// reportBoot tells the API, for this instance of its fleet, that the
// machine cannot run its runner (problem is why), so the fleet view and
// fleetq doctor show it. Failing to report is only logged.
func (a *Agent) reportBoot(ctx context.Context, problem error) {
	msg := problem.Error()
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	a.log.Error("the runner cannot run on this machine; not registering until it can", "error", msg, "image_id", a.cfg.ImageID)
	r := wire.BootReportRequest{
		WorkerID: a.cfg.WorkerID, FleetSlug: a.cfg.Fleet, Stage: a.cfg.Stage,
		InstanceID: a.cfg.InstanceID, InstanceType: a.cfg.InstanceType, ImageID: a.cfg.ImageID,
		Problem: wire.BootProblemRunnerMissing, Message: msg, AgentVersion: version.Get(),
	}
	for attempt := 1; ; attempt++ {
		headers, err := a.credentials(ctx)
		if err == nil {
			err = a.client.BootReport(ctx, headers, r)
		}
		if err == nil {
			a.log.Info("reported the missing runner on the fleet")
			return
		}
		if attempt >= bootReportTries || !retryable(err) || ctx.Err() != nil {
			a.log.Warn("boot report failed", "error", err.Error())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-a.cfg.Clock.After(a.backoff(attempt, err)):
		}
	}
}

// register registers the worker, retrying with jittered backoff on 429,
// 5xx and network errors (and a full fleet, which may free up).
func (a *Agent) register(ctx context.Context) error {
	r := wire.RegisterRequest{
		WorkerID: a.cfg.WorkerID, FleetSlug: a.cfg.Fleet, Stage: a.cfg.Stage,
		InstanceID: a.cfg.InstanceID, InstanceType: a.cfg.InstanceType, AvailabilityZone: a.cfg.AZ,
		PurchaseOption: a.cfg.PurchaseOption,
		AgentKey:       a.cfg.AgentKey,
		AgentVersion:   version.Get(),
		Boot:           a.bootTimes(),
	}
	if n := a.cfg.MaxConcurrency; n != 0 {
		r.MaxConcurrency = &n
	}
	r.Capabilities = a.capabilities()
	for attempt := 1; ; attempt++ {
		// A fresh signature per attempt: the API refuses old ones.
		headers, err := a.credentials(ctx)
		if err != nil {
			return fmt.Errorf("register: %w", err)
		}
		reg, err := a.client.Register(ctx, headers, r)
		if err == nil {
			if reg.PollSeconds <= 0 {
				reg.PollSeconds = 5
			}
			if reg.HeartbeatSeconds <= 0 {
				reg.HeartbeatSeconds = 30
			}
			a.mu.Lock()
			a.reg = reg
			a.mu.Unlock()
			a.log.Info("registered", "workflows", reg.WorkflowsAssigned, "poll_seconds", reg.PollSeconds, "heartbeat_seconds", reg.HeartbeatSeconds)
			return nil
		}
		if !retryable(err) && !isCode(err, http.StatusConflict, "") && !isCode(err, http.StatusUnprocessableEntity, "") {
			return fmt.Errorf("register: %w", err)
		}
		d := a.backoff(attempt, err)
		a.log.Warn("register failed; retrying", "error", err.Error(), "in", d.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.cfg.Clock.After(d):
		}
	}
}

func (a *Agent) backoff(attempt int, err error) time.Duration {
	var ae *wire.Error
	if errors.As(err, &ae) && ae.RetryAfter > 0 {
		return ae.RetryAfter
	}
	d := a.cfg.BackoffBase << min(attempt-1, 16)
	if d > a.cfg.BackoffMax || d <= 0 {
		d = a.cfg.BackoffMax
	}
	return jitter(d)
}

// jitter spreads d over [0.8d, 1.2d].
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// start runs a leased job in its own goroutine with its heartbeat.
func (a *Agent) start(ctx context.Context, l Lease) {
	jobCtx, cancel := context.WithCancel(ctx)
	r := &running{lease: l, cancel: cancel, log: newTail(a.cfg.LogTailBytes)}
	r.outputs.Store(newOutputURLs(l.OutputURL, l.OutputURLs, l.LogURL))
	a.mu.Lock()
	a.jobs[l.JobID] = r
	hb := time.Duration(a.reg.HeartbeatSeconds) * time.Second
	a.mu.Unlock()
	log := a.log.With("job_id", l.JobID, "workflow_id", l.WorkflowID, "attempt", l.Attempt)
	log.Info("job leased")
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer a.finished(l.JobID)
		beatDone := make(chan struct{})
		go a.heartbeat(ctx, jobCtx, r, hb, log, beatDone)
		job := &Job{Lease: l, HTTP: a.cfg.HTTP, Clock: a.cfg.Clock, Progress: func(p float64) { r.progress.Store(p) }, Log: r.log,
			outputs: func() (string, map[string]string) { o := r.outputs.Load(); return o.main, o.named }}
		result, err := a.cfg.Runner.Run(jobCtx, job)
		cancel()
		<-beatDone
		// The attempt's log goes up before its outcome is reported, so a
		// producer who hears of the outcome finds the log.
		a.uploadLog(ctx, r, log)
		if !r.settled.CompareAndSwap(false, true) {
			return // canceled, lease lost, or requeued by a shutdown
		}
		a.report(ctx, l, result, err, log)
	}()
}

func (a *Agent) finished(jobID string) {
	a.mu.Lock()
	delete(a.jobs, jobID)
	a.mu.Unlock()
	select {
	case a.freed <- struct{}{}:
	default:
	}
}

// heartbeat extends the lease until the job ends; a cancel or a lost lease
// stops the job at once.
func (a *Agent) heartbeat(ctx, jobCtx context.Context, r *running, every time.Duration, log *slog.Logger, done chan struct{}) {
	defer close(done)
	t := a.cfg.Clock.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-jobCtx.Done():
			return
		case <-t.Chan():
		}
		var progress *float64
		if p, ok := r.progress.Load().(float64); ok {
			progress = &p
		}
		cur := r.outputs.Load()
		margin := a.cfg.URLRefreshMargin
		if margin <= 0 {
			margin = max(2*every, time.Minute)
		}
		refresh := !cur.validUntil.IsZero() && cur.validUntil.Sub(a.cfg.Clock.Now()) < margin
		beat, err := a.client.Heartbeat(ctx, r.lease.JobID, r.lease.LeaseToken, progress, refresh)
		if err == nil && refresh && beat.LeaseURLs != nil && (beat.OutputURL != "" || len(beat.OutputURLs) > 0) {
			r.outputs.Store(newOutputURLs(beat.OutputURL, beat.OutputURLs, beat.LogURL))
			log.Debug("output URLs refreshed")
		}
		switch {
		case err == nil && beat.Cancel:
			if r.settled.CompareAndSwap(false, true) {
				log.Info("job canceled by an operator; stopping it")
				r.cancel()
			}
			return
		case isCode(err, http.StatusConflict, wire.CodeLeaseLost):
			if r.settled.CompareAndSwap(false, true) {
				log.Warn("lease lost; stopping the job")
				r.cancel()
			}
			return
		case err != nil && jobCtx.Err() == nil:
			log.Warn("heartbeat failed", "error", err.Error())
		}
	}
}

// report sends the job's outcome, retrying transient failures a few times
// (a lost lease ends it: the job belongs to someone else now).
func (a *Agent) report(ctx context.Context, l Lease, result json.RawMessage, runErr error, log *slog.Logger) {
	for attempt := 1; attempt <= 5; attempt++ {
		var err error
		if runErr == nil {
			err = a.client.Complete(ctx, l.JobID, l.LeaseToken, result)
		} else {
			err = a.client.Fail(ctx, l.JobID, l.LeaseToken, asJobError(runErr))
		}
		switch {
		case err == nil:
			if runErr == nil {
				log.Info("job succeeded")
			} else {
				je := asJobError(runErr)
				log.Info("job failed", "code", je.Code, "retryable", je.Retryable, "error", je.Message)
			}
			return
		case isCode(err, http.StatusConflict, wire.CodeLeaseLost):
			log.Warn("lease lost before the outcome was reported")
			return
		case !retryable(err) || ctx.Err() != nil:
			log.Error("reporting the outcome failed", "error", err.Error())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-a.cfg.Clock.After(a.backoff(attempt, err)):
		}
	}
}

// requeueAll gives back every running job with reason and stops it.
func (a *Agent) requeueAll(ctx context.Context, reason job.PreemptReason) {
	a.mu.Lock()
	jobs := make([]*running, 0, len(a.jobs))
	for _, r := range a.jobs {
		jobs = append(jobs, r)
	}
	a.mu.Unlock()
	for _, r := range jobs {
		if !r.settled.CompareAndSwap(false, true) {
			continue
		}
		r.cancel()
		if err := a.client.Requeue(ctx, r.lease.JobID, r.lease.LeaseToken, reason); err != nil {
			a.log.Warn("requeue failed; the lease will expire or deregistration gives it back", "job_id", r.lease.JobID, "error", err.Error())
			continue
		}
		a.log.Info("job requeued", "job_id", r.lease.JobID, "reason", reason)
	}
}

// shutdown ends the agent for a Spot notice or a drain.
func (a *Agent) shutdown(ctx context.Context, reason job.PreemptReason) error {
	a.leasing.Store(false)
	a.log.Info("shutting down", "reason", reason, "running", a.slotsUsed())
	if reason == job.Shutdown && a.cfg.DrainTimeout > 0 && a.unhealthyReason() == "" {
		finished := make(chan struct{})
		go func() { a.wg.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-a.cfg.Clock.After(a.cfg.DrainTimeout):
		case <-ctx.Done():
		}
	}
	a.requeueAll(ctx, reason)
	a.wg.Wait()
	if a.unhealthyReason() != "" {
		a.reportUnhealthy(ctx)
	} else if err := a.client.Deregister(ctx); err != nil {
		a.log.Warn("deregister failed", "error", err.Error())
	} else {
		a.log.Info("deregistered")
	}
	return a.unhealthyErr()
}

// abandon stops every job without reporting (the machine is gone).
func (a *Agent) abandon() {
	a.mu.Lock()
	for _, r := range a.jobs {
		r.settled.Store(true)
		r.cancel()
	}
	a.mu.Unlock()
	a.wg.Wait()
}

// watchMetadata polls the instance metadata for a Spot notice (shut down
// now) or a rebalance recommendation (stop leasing).
func (a *Agent) watchMetadata(ctx context.Context) {
	t := a.cfg.Clock.NewTicker(a.cfg.SpotPoll)
	defer t.Stop()
	for {
		if spot, err := a.cfg.Metadata.SpotNotice(ctx); err == nil && spot {
			a.log.Warn("Spot interruption notice")
			a.signal(job.SpotInterruption)
			return
		}
		if a.leasing.Load() {
			if rb, err := a.cfg.Metadata.Rebalance(ctx); err == nil && rb {
				// Stopped before it is said: whoever hears it may count
				// on no poll following.
				a.leasing.Store(false)
				a.log.Warn("rebalance recommendation: no new leases; running jobs go on")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}
