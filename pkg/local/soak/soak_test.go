package soak_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/faultproxy"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/jobevents"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// The soak's size. The defaults keep it near a minute under -race on two
// cores, where the embedded DynamoDB server (one lock, a copy of the table
// per transaction) is the bottleneck; FLEETQ_SOAK_JOBS and
// FLEETQ_SOAK_WORKERS run it larger (docs/testing.md records the figures).
var (
	jobs    = envInt("FLEETQ_SOAK_JOBS", 60)
	workers = envInt("FLEETQ_SOAK_WORKERS", 12)
)

const (
	producers = 4
	ddbFaults = 0.07
	sqsFaults = 0.05
	ebFaults  = 0.05
	asgFaults = 0.07
	// group is the fleet's Auto Scaling Group on the fake Auto Scaling API.
	group = "fleetq-soak-gpu"
	// scalerEvery is the fake time between the scaler's ticks.
	scalerEvery = 5 * time.Second
	// relayEvery is the fake time between the outbox relay's sweeps, which
	// send what a transition's own announcement did not (in AWS the
	// scaler's tick sweeps, once a minute).
	relayEvery = 5 * time.Second
	// idleStep is the fake time that passes when no worker polls or holds
	// a lease and the fleet's work waits on time (a backoff, the lease of
	// a worker that crashed).
	idleStep = 5 * time.Second
	leaseFor = 30 * time.Second
	// tick is the fake time each worker operation takes.
	tick = 100 * time.Millisecond
	// retryWait caps each wait between an AWS client's attempts.
	retryWait = 10 * time.Millisecond
	// soakDeadline bounds the wait for every job to finish.
	soakDeadline = 10 * time.Minute
	fleetSlug    = "gpu"
	workflowID   = "wf"
)

// shortWaits keeps a service's retry attempts (awsenv.Retries) and draws
// each wait between them from 0 to retryWait: the soak is about what the
// faults do, and the services' own waits (up to a second apiece for
// DynamoDB, drawn in wall time) would make up most of its run.
func shortWaits(o *retry.StandardOptions) {
	o.MaxBackoff = retryWait
	o.Backoff = retry.NewExponentialJitterBackoff(retryWait)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

const soakConfig = `
stage: soak
registration_limit: 10000
fleets:
  - slug: gpu
    workflows: [wf]
    instance_types: [g5.xlarge]
    accept_secret: true
    max_instances: 10
    worker_cap: 1000
    lease_seconds: 30
    heartbeat_seconds: 10
    poll_seconds: 1
    preemption_cap: 100
    retry:
      max_attempts: 20
      backoff: [5s]
`

const (
	fleetSecret   = "soak-fleet-secret"
	operatorToken = "soak-operator-token"
)

// grant is one lease a worker was given; end is when it stopped holding it
// as far as the soak knows (zero: it held it until it expired).
type grant struct {
	job, worker, token string
	from, expires, end time.Time
	how                string // what the worker did with it
	// got and released order the lease among every event the soak saw:
	// got when the poll's answer arrived, released when the worker first
	// sent its release (0: never released: abandoned or lost).
	got, released int64
}

type soak struct {
	t     *testing.T
	url   string
	http  *http.Client
	clock *clock.Fake

	// work holds one token per event that may have made a job available
	// (a submission dispatched, a lease released); an idle worker takes one.
	work chan struct{}
	// stop is closed when the soak is over: idle workers stop waiting.
	stop chan struct{}
	// polling and holding count the workers in a poll and those holding
	// a lease they were answered; pacing lets one idle worker at a time
	// see whether fake time should move on (waitForWork).
	polling, holding atomic.Int64
	pacing           sync.Mutex
	// backlog reads the fleet's ready, delayed and leased jobs.
	backlog func() (fleetstate.Backlog, error)
	// found receives each time a worker's poll found nothing to lease: the
	// moment to see whether the run is over.
	found chan struct{}
	seq   atomic.Int64

	mu       sync.Mutex
	grants   []*grant
	accepted map[string]bool
	codes    map[string]int // error codes clients saw
	actions  map[string]int
	retries  atomic.Int64
	done     atomic.Bool
}

// waitForWork returns when a job may be available to lease: a token of
// work (a job created or filed by dispatch, a lease released), or fake time moved on. Fake time
// moves with the work: each worker operation moves it a tick. When no
// worker polls or holds a lease, nothing the soak does will change the
// fleet's jobs but time: the idle worker that sees it (one at a time)
// reads the backlog, and if jobs are queued or leased (backoffs, leases
// of crashed workers) it moves fake time on by idleStep, wakes a worker
// per job that may now be due, and polls again itself. With nothing
// queued or leased, the work still to come is in the submission queue,
// and its dispatch brings a token.
func (s *soak) waitForWork() {
	s.pacing.Lock()
	again := s.polling.Load() == 0 && s.holding.Load() == 0 && s.pace()
	s.pacing.Unlock()
	if again {
		return
	}
	select {
	case <-s.work:
	case <-s.stop:
	}
}

// pace reads the backlog for waitForWork and reports whether the worker
// should poll again at once.
func (s *soak) pace() bool {
	b, err := s.backlog()
	if err != nil {
		return true // look again
	}
	// A poll that began meanwhile may be answered a lease: time stays.
	if s.polling.Load() != 0 || s.holding.Load() != 0 {
		return false
	}
	jobs := b.Queued() + b.Leased
	if jobs == 0 {
		return false
	}
	s.clock.Advance(idleStep)
	for range jobs - 1 {
		s.signal()
	}
	return true
}

func (s *soak) signal() {
	select {
	case s.work <- struct{}{}:
	default:
	}
}

// call sends one request and answers its status and body; a transport error
// counts as status 0.
func (s *soak) call(method, path, auth string, body any) (int, map[string]any) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	switch auth {
	case "op":
		req.Header.Set("Authorization", "Bearer "+operatorToken)
	case "secret":
		req.Header.Set(wire.HeaderFleetSecret, fleetSecret)
	default:
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	res, err := s.http.Do(req)
	if err != nil {
		s.mu.Lock()
		s.codes["transport "+err.Error()]++
		s.mu.Unlock()
		return 0, nil
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if res.StatusCode >= 400 {
		code := "(none)"
		if e, ok := out["error"].(map[string]any); ok {
			code, _ = e["code"].(string)
		}
		s.mu.Lock()
		s.codes[fmt.Sprintf("%d %s", res.StatusCode, code)]++
		s.mu.Unlock()
	}
	return res.StatusCode, out
}

// retried repeats a request while it answers 5xx or nothing, as a client
// following the protocol does, and answers the last status and body and
// whether an earlier attempt may have acted.
func (s *soak) retried(method, path, auth string, body any) (int, map[string]any, bool) {
	ambiguous := false
	for i := 0; ; i++ {
		status, out := s.call(method, path, auth, body)
		if status != 0 && status < 500 {
			return status, out, ambiguous
		}
		ambiguous = true
		s.retries.Add(1)
		if i > 50 {
			s.mu.Lock()
			s.t.Errorf("%s %s: still %d after 50 retries: %v", method, path, status, s.codes)
			s.mu.Unlock()
			return status, out, ambiguous
		}
	}
}

func (s *soak) count(action string) {
	s.mu.Lock()
	s.actions[action]++
	s.mu.Unlock()
}

func parseTime(t *testing.T, v any) time.Time {
	str, _ := v.(string)
	at, err := time.Parse(time.RFC3339Nano, str)
	if err != nil {
		t.Errorf("time %v: %v", v, err)
	}
	return at
}

func (s *soak) register(id string) string {
	status, out, _ := s.retried("POST", wire.PathRegister, "secret", map[string]any{"worker_id": id, "fleet_slug": fleetSlug, "stage": "soak", "max_concurrency": 1, "instance_id": "i-" + id})
	if status != 201 {
		s.t.Errorf("register %s: %d %v", id, status, out)
		return ""
	}
	return out["token"].(string)
}

// worker runs one worker, which crashes now and then and comes back under a
// new id, until the soak is done.
func (s *soak) worker(n int, rnd *rand.Rand) {
	gen := 0
	id := fmt.Sprintf("w%02d-%d", n, gen)
	token := s.register(id)
	for !s.done.Load() && token != "" {
		s.polling.Add(1)
		status, out, _ := s.retried("POST", wire.PathPoll, token, map[string]any{"current_load": 0})
		if status == 200 {
			s.holding.Add(1) // before the poll ends: pace must not see neither
		}
		s.polling.Add(-1)
		if status == 204 {
			select {
			case s.found <- struct{}{}:
			default:
			}
			s.waitForWork()
			continue
		}
		// Fake time moves with the work: a lease of 30 s lasts about 300
		// worker operations, so only abandoned leases expire in practice.
		s.clock.Advance(tick)
		if status == 409 {
			// A poll hands over the lease it took or takes it back: it
			// never answers lease_lost.
			s.count("poll answered lease_lost")
			s.t.Errorf("poll: %d %v", status, out)
			continue
		}
		if status != 200 {
			s.t.Errorf("poll: %d %v", status, out)
			return
		}
		j := out["job"].(map[string]any)
		g := &grant{job: j["job_id"].(string), worker: id, token: j["lease_token"].(string)}
		g.expires = parseTime(s.t, j["lease_expires_at"])
		g.from = g.expires.Add(-leaseFor)
		g.got = s.seq.Add(1)
		s.mu.Lock()
		s.grants = append(s.grants, g)
		s.mu.Unlock()
		ref := map[string]any{"job_id": g.job, "lease_token": g.token}
		with := func(k string, v any) map[string]any {
			m := map[string]any{k: v}
			for k, v := range ref {
				m[k] = v
			}
			return m
		}
		record := func(how string) {
			s.mu.Lock()
			g.how += how + ";"
			s.mu.Unlock()
		}
		// release reports the lease ended; the soak counts it ended from
		// the first attempt, the earliest it can have taken effect.
		release := func(path string, body any) {
			start, sent := s.clock.Now(), s.seq.Add(1)
			status, out, ambiguous := s.retried("POST", path, token, body)
			record(fmt.Sprintf("%s→%d", path[strings.LastIndexByte(path, '/')+1:], status))
			switch {
			case status == 200 || (status == 409 && ambiguous):
				s.mu.Lock()
				g.end, g.released = start, sent
				s.mu.Unlock()
			case status == 409:
				// the lease was lost (expired and re-leased, or canceled)
			default:
				s.t.Errorf("%s: %d %v", path, status, out)
			}
			s.clock.Advance(tick)
			s.signal()
		}
		switch r := rnd.Float64(); {
		case r < 0.08:
			// Crash: the lease is abandoned and expires; the machine comes
			// back as a new worker.
			s.count("crash")
			record("crash")
			gen++
			id = fmt.Sprintf("w%02d-%d", n, gen)
			token = s.register(id)
		case r < 0.20:
			s.count("fail")
			release(wire.PathFail, with("error", map[string]any{"message": "soak failure", "retryable": true}))
		case r < 0.30:
			s.count("requeue")
			release(wire.PathRequeue, with("reason", string(job.SpotInterruption)))
		case r < 0.34:
			s.count("cancel")
			// 409 conflict: the job already finished, through another
			// worker's lease after this one ran out (fake time runs ahead
			// of a slow worker: the other workers' operations advance it).
			switch status, out, _ := s.retried("POST", "/api/jobs/"+g.job+"/cancel", "op", nil); {
			case status == 200:
			case status == 409 && errorCode(out) == string(wire.CodeConflict):
				s.count("cancel after the job finished")
			default:
				s.t.Errorf("cancel %s: %d %v", g.job, status, out)
			}
			release(wire.PathComplete, with("result", map[string]any{"ok": true}))
		case r < 0.40:
			s.count("heartbeat+complete")
			status, out, _ := s.retried("POST", wire.PathHeartbeat, token, with("progress", 0.5))
			if status == 200 {
				at := parseTime(s.t, out["lease_expires_at"])
				s.mu.Lock()
				if at.After(g.expires) {
					g.expires = at
				}
				s.mu.Unlock()
			}
			release(wire.PathComplete, with("result", map[string]any{"ok": true}))
		default:
			s.count("complete")
			release(wire.PathComplete, with("result", map[string]any{"ok": true}))
		}
		s.holding.Add(-1)
	}
}

// TestSoakNothingLostUnderFaults is the soak: see the package doc.
func TestSoakNothingLostUnderFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes about a minute")
	}
	started := time.Now()
	// The embedded DynamoDB by default; dynalite, its transactions added,
	// with FLEETQ_TEST_DYNALITE=1, or the endpoint named by
	// FLEETQ_TEST_DYNAMODB_ENDPOINT (testenv), as the API suite.
	ddbURL, backend := "", "minidyn"
	if ep := os.Getenv(testenv.EnvDynamoDBEndpoint); ep != "" {
		ddbURL, backend = testenv.DynamoDBEndpoint(t), ep
	} else if testenv.OnDynalite() {
		ddbURL, backend = testenv.DynamoDBEndpoint(t), "dynalite"
	} else {
		ddb, err := localaws.StartDynamoDB("")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ddb.Close() })
		ddbURL = ddb.URL
	}
	sqsSrv, err := localaws.SharedSQS("")
	if err != nil {
		t.Fatal(err)
	}
	// The workers' and producers' requests keep their connections (the
	// default transport keeps two per host and would open one per call),
	// and wait for an answer as long as the agent's own client does.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = workers + producers
	s := &soak{t: t, http: &http.Client{Timeout: 60 * time.Second, Transport: transport}, clock: clock.NewFake(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)),
		work: make(chan struct{}, workers), found: make(chan struct{}, 1), accepted: map[string]bool{}, codes: map[string]int{}, actions: map[string]int{},
		stop: make(chan struct{})}
	ddbProxy, err := faultproxy.Start(ddbURL, faultproxy.Options{Rate: ddbFaults, Delay: 20 * time.Millisecond,
		Forwarded: func(op string) {
			if op == "PutItem" { // a job created (a submission the API did not accept first)
				s.signal()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ddbProxy.Close() })
	sqsProxy, err := faultproxy.Start(sqsSrv.URL, faultproxy.Options{Rate: sqsFaults, Delay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqsProxy.Close() })

	// Outcome events go to the embedded EventBridge API through a fault
	// proxy and the real SDK client, as the functions send them.
	eb, err := localaws.StartJSONAPI("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eb.Close() })
	ebProxy, err := faultproxy.Start(eb.URL, faultproxy.Options{Rate: ebFaults, Delay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ebProxy.Close() })
	ebClient := eventbridge.NewFromConfig(awsenv.Static(""), func(o *eventbridge.Options) {
		o.BaseEndpoint = aws.String(ebProxy.URL)
		o.Retryer = awsenv.Retryer(awsenv.EventBridge, shortWaits)
	})

	// The scaler and wake-on-enqueue scale an Auto Scaling Group on the
	// fake Auto Scaling API, through a fault proxy and the real SDK client
	// and adapter (pkg/aws/asg, whose retries have short waits here).
	asgSrv, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = asgSrv.Close() })
	asgSrv.PutGroup(localaws.ASGGroup{Name: group, Min: 0, Max: 10})
	asgProxy, err := faultproxy.Start(asgSrv.URL, faultproxy.Options{Rate: asgFaults, Delay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = asgProxy.Close() })
	adapter := asg.New(autoscaling.NewFromConfig(localaws.Config(asgProxy.URL), asg.WithoutSDKRetries),
		asg.Options{BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond})
	groups := scaler.Groups{Adapter: adapter, Names: map[string]string{fleetSlug: group}}

	cfg, err := fleetconfig.Parse("soak.yaml", []byte(soakConfig))
	if err != nil {
		t.Fatal(err)
	}
	stack, err := devstack.Start(context.Background(), devstack.Options{Addr: "127.0.0.1:0", Config: cfg, Clock: s.clock,
		FleetSecrets: map[string]string{"gpu": fleetSecret}, OperatorToken: operatorToken, Logger: slog.New(slog.DiscardHandler),
		DynamoDBEndpoint: ddbProxy.URL, SQSEndpoint: sqsProxy.URL,
		DynamoDBOptions:   []func(*dynamodb.Options){func(o *dynamodb.Options) { o.Retryer = awsenv.Retryer(awsenv.DynamoDB, shortWaits) }},
		SQSOptions:        []func(*sqs.Options){func(o *sqs.Options) { o.Retryer = awsenv.Retryer(awsenv.SQS, shortWaits) }},
		VisibilityTimeout: 2 * time.Second, MaxReceives: 50, RelayInterval: relayEvery, Fleet: devstack.FleetOptions{Tick: -1, NoLocalFleet: true, Capacity: groups, Lifecycle: adapter},
		Publisher: jobevents.EventBridge{Client: ebClient, Bus: "soak"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	s.url = stack.URL
	// Dispatch files what the API accepted (an update of the accepted job,
	// not a put): each batch it handles is work for as many workers as a
	// batch holds jobs.
	dispatched := stack.Dispatched()
	go func() {
		for {
			select {
			case <-dispatched:
				for range 10 { // the dev stack's batch size, as the event source mapping's
					s.signal()
				}
			case <-s.stop:
				return
			}
		}
	}()
	s.backlog = func() (fleetstate.Backlog, error) { return stack.Store.CountBacklog(context.Background(), fleetSlug) }

	// The scaler's schedule, as its EventBridge rule delivers it, on the
	// soak's fake time: a tick that fails (Auto Scaling or DynamoDB past
	// their retries) is counted and the next one starts again from what
	// the store and the group say.
	ticks := &tickFigures{}
	stopTicks := make(chan struct{})
	tickDone := make(chan struct{})
	every := s.clock.NewTicker(scalerEvery)
	go func() {
		defer close(tickDone)
		defer every.Stop()
		for {
			select {
			case <-stopTicks:
				return
			case <-every.Chan():
				ticks.run(stack, s.clock)
			}
		}
	}()

	var wg sync.WaitGroup
	for n := 0; n < workers; n++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.worker(n, rand.New(rand.NewPCG(uint64(n), 42)))
		}()
	}
	// Producers: a 503 means nothing was queued; the same job id is sent
	// again, and a repeat yields one job.
	var pwg sync.WaitGroup
	for p := 0; p < producers; p++ {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := p; i < jobs; i += producers {
				id := fmt.Sprintf("soak:soak-%03d", i) // the tenant's id: tenant.JobID
				status, out, _ := s.retried("POST", wire.PathJobs, "op", map[string]any{"job_id": id, "tenant_id": "soak", "workflow_id": workflowID, "input": map[string]any{"i": i}})
				if status != 202 {
					t.Errorf("submit %s: %d %v", id, status, out)
					continue
				}
				s.mu.Lock()
				s.accepted[id] = true
				s.mu.Unlock()
			}
		}()
	}
	pwg.Wait()

	// Each time a worker finds nothing to lease, see whether the fleet has
	// nothing queued or leased and every accepted job has reached a
	// terminal state.
	ctx := context.Background()
	deadline := time.NewTimer(soakDeadline)
	defer deadline.Stop()
	var final map[job.Status]int
	for {
		select {
		case <-s.found:
		case <-deadline.C:
			_, wout := s.call("GET", wire.PathAdminWorkers, "op", nil)
			_, fout := s.call("GET", wire.PathAdminFleets, "op", nil)
			busy := map[string]any{}
			if ws, ok := wout["workers"].([]any); ok {
				for _, w := range ws {
					w := w.(map[string]any)
					if w["leases"].(float64) != 0 {
						busy[w["worker_id"].(string)] = w["leases"]
					}
				}
			}
			t.Logf("workers with leases: %v; fleets %v", busy, fout)
			s.mu.Lock()
			t.Fatalf("jobs not terminal after the deadline: %v; %d leases, actions %v, errors %v; DynamoDB faults %v of %d calls, SQS faults %v; calls %v %v",
				final, len(s.grants), s.actions, s.codes, ddbProxy.Counts(), totalCalls(ddbProxy), sqsProxy.Counts(), callsByOp(ddbProxy), callsByOp(sqsProxy))
		}
		if status, out := s.call("GET", wire.PathAdminFleets, "op", nil); status != 200 || !idle(out) {
			continue
		}
		final = map[job.Status]int{}
		pending := 0
		for id := range s.accepted {
			j, err := stack.Store.GetJob(ctx, id)
			switch {
			case err != nil:
				pending++ // not dispatched yet, or a read that failed: look again
			case j.Status.Terminal():
				final[j.Status]++
			default:
				pending++
			}
		}
		if pending == 0 {
			break
		}
	}
	s.done.Store(true)
	close(s.stop)
	wg.Wait()
	close(stopTicks)
	<-tickDone

	// 1. Nothing lost: every accepted job ended in exactly one terminal state.
	if len(s.accepted) != jobs {
		t.Fatalf("%d of %d submissions accepted", len(s.accepted), jobs)
	}
	total := 0
	for _, n := range final {
		total += n
	}
	if total != jobs {
		t.Fatalf("%d terminal jobs of %d", total, jobs)
	}

	// 2. No two workers held a live lease on one job at the same instant.
	byJob := map[string][]*grant{}
	for _, g := range s.grants {
		byJob[g.job] = append(byJob[g.job], g)
	}
	// A lease is stamped with the time its poll read at its start, so
	// stamps of a slow poll can precede the expiry that freed its job; the
	// order the soak saw is what tells whether two workers worked on one
	// job at once: from a poll's answer to its worker's release, no other
	// worker may have been answered a lease on that job.
	overlaps := 0
	for id, gs := range byJob {
		for _, a := range gs {
			if a.released == 0 {
				continue
			}
			for _, b := range gs {
				if b != a && b.got > a.got && b.got < a.released {
					overlaps++
					t.Errorf("job %s: leased to %s while %s worked on it (%+v then %+v)", id, b.worker, a.worker, *a, *b)
				}
			}
		}
	}

	// 3. Every worker's lease count is the number of jobs it holds: none.
	status, out, _ := s.retried("GET", wire.PathAdminWorkers, "op", nil)
	if status != 200 {
		t.Fatalf("list workers: %d %v", status, out)
	}
	ws, _ := out["workers"].([]any)
	for _, w := range ws {
		w := w.(map[string]any)
		if w["leases"].(float64) != 0 {
			t.Errorf("worker %s counts %v leases with every job finished", w["worker_id"], w["leases"])
		}
	}

	// 4. Every error a client saw is a documented code.
	documented := map[string]bool{}
	for _, c := range wire.Codes {
		if c != wire.CodeUnknown {
			documented[string(c)] = true
		}
	}
	var seen []string
	for k, n := range s.codes {
		seen = append(seen, fmt.Sprintf("%s ×%d", k, n))
		if code := k[strings.IndexByte(k, ' ')+1:]; !documented[code] {
			t.Errorf("clients saw %d answers with the undocumented code %q", n, k)
		}
	}
	sort.Strings(seen)

	// 5. No outcome event lost or published twice for one transition.
	ev := checkOutcomeEvents(t, stack, eb, s.accepted)

	// 6. The scaler survived the faults: it scaled the group while they
	// fell, and with them gone one tick sets the group to what it decides.
	checkScaler(t, stack, s.clock, asgSrv, asgProxy, ticks)

	t.Logf("soak on %s: %d jobs, %d workers (%d listed at the end: the scaler removes stale ones), %d leases, %d overlapping; outcomes %v; actions %v",
		backend, jobs, workers, len(ws), len(s.grants), overlaps, final, s.actions)
	t.Logf("soak: client retries after 5xx %d; errors clients saw %v; %s",
		s.retries.Load(), seen, time.Since(started).Round(time.Second))
	t.Logf("soak: faults by service: DynamoDB %v of %d calls; SQS %v of %d; EventBridge %v of %d; Auto Scaling %v of %d",
		ddbProxy.Counts(), totalCalls(ddbProxy), sqsProxy.Counts(), sumCalls(sqsProxy, sqsOps), ebProxy.Counts(), ebProxy.Calls("PutEvents"),
		asgProxy.Counts(), sumCalls(asgProxy, asgOps))
	t.Logf("soak: outcome events %v (%d distinct, %d delivered again with the same id)", ev.byType, ev.distinct, ev.again)
	t.Logf("soak: DynamoDB calls %v", callsByOp(ddbProxy))
	t.Logf("soak: scaler ticks %d, %d failed (%v); Auto Scaling calls %v; the group's desired capacity at most %d",
		ticks.ok+ticks.failed, ticks.failed, ticks.errs, asgCalls(asgSrv), ticks.maxDesired(asgSrv))
}

// eventFigures counts the outcome events EventBridge received.
type eventFigures struct {
	byType          map[string]int // distinct events by detail type
	distinct, again int
}

// announced reports whether a history entry is a transition the outbox
// announces as "Job Failed" (a failed attempt that will be retried).
func announcedFailure(h job.HistoryEntry) bool {
	if h.To != job.Queued {
		return false
	}
	switch h.Reason {
	case job.ReasonWorkerFailed, job.ReasonLeaseExpired, job.ReasonRunTimeout:
		return true
	}
	return false
}

// checkOutcomeEvents drains the outbox, then holds every accepted job's
// events against its history: one terminal event matching its final
// status, one "Job Failed" per failed attempt that was retried, none for
// anything else. A redelivery under the same event id is the outbox's
// at-least-once delivery (consumers deduplicate by id) and is counted; two
// ids for one transition, or a transition without its event, fail.
func checkOutcomeEvents(t *testing.T, stack *devstack.Stack, eb *localaws.JSONAPI, accepted map[string]bool) eventFigures {
	t.Helper()
	ctx := context.Background()
	for i := 0; ; i++ {
		n, err := stack.Relay.Drain(ctx)
		if err == nil && n == 0 {
			break
		}
		if i > 100 {
			t.Fatalf("the outbox does not drain: %d relayed, %v", n, err)
		}
	}
	f := eventFigures{byType: map[string]int{}}
	seen := map[string]bool{}
	byJob := map[string]map[string]int{} // job -> detail type -> distinct events
	for _, e := range eb.Events() {
		var d store.JobEventDetail
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
			t.Errorf("event detail %q: %v", e.Detail, err)
			continue
		}
		if seen[d.EventID] {
			f.again++
			continue
		}
		seen[d.EventID] = true
		f.distinct++
		f.byType[e.DetailType]++
		if !accepted[d.JobID] {
			t.Errorf("event %s for a job never accepted", d.EventID)
		}
		if byJob[d.JobID] == nil {
			byJob[d.JobID] = map[string]int{}
		}
		byJob[d.JobID][e.DetailType]++
	}
	terminal := map[job.Status]string{job.Succeeded: store.EventSucceeded, job.Dead: store.EventDead, job.Canceled: store.EventCanceled}
	for id := range accepted {
		j, err := stack.Store.GetJob(ctx, id)
		if err != nil {
			t.Errorf("job %s: %v", id, err)
			continue
		}
		got := byJob[id]
		for st, typ := range terminal {
			want := 0
			if j.Status == st {
				want = 1
			}
			if got[typ] != want {
				t.Errorf("job %s ended %s: %d distinct %q events, want %d", id, j.Status, got[typ], typ, want)
			}
		}
		failures := 0
		for _, h := range j.History {
			if announcedFailure(h) {
				failures++
			}
		}
		// A trimmed history may have dropped early failures; a whole one
		// must match exactly.
		whole := len(j.History) > 0 && j.History[0].Reason == job.ReasonCreated
		if (whole && got[store.EventFailed] != failures) || (!whole && got[store.EventFailed] < failures) {
			t.Errorf("job %s: %d distinct %q events for %d retried failures in its history (whole %v)", id, got[store.EventFailed], store.EventFailed, failures, whole)
		}
	}
	return f
}

// idle reports whether the fleets answer shows nothing queued or leased.
func idle(out map[string]any) bool {
	fleets, _ := out["fleets"].([]any)
	for _, f := range fleets {
		f := f.(map[string]any)
		if f["queued"].(float64) != 0 || f["leased"].(float64) != 0 {
			return false
		}
	}
	return len(fleets) > 0
}

func callsByOp(p *faultproxy.Proxy) map[string]int {
	out := map[string]int{}
	for _, op := range []string{"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem", "TransactWriteItems", "SendMessage", "ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility"} {
		if n := p.Calls(op); n > 0 {
			out[op] = n
		}
	}
	return out
}

func totalCalls(p *faultproxy.Proxy) int {
	n := 0
	for _, op := range []string{"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem", "TransactWriteItems"} {
		n += p.Calls(op)
	}
	return n
}

// tickFigures counts the scaler's ticks in the soak.
type tickFigures struct {
	mu         sync.Mutex
	ok, failed int
	errs       map[string]int // failed ticks by the first words of their error
}

var scheduled = events.CloudWatchEvent{Source: "aws.events", DetailType: "Scheduled Event"}

// run delivers one Scheduled Event to the scaler as its rule does.
func (f *tickFigures) run(stack *devstack.Stack, c clock.Clock) error {
	ev := scheduled
	ev.Time = c.Now()
	_, err := stack.DeliverEvent(context.Background(), ev)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.failed++
		if f.errs == nil {
			f.errs = map[string]int{}
		}
		f.errs[tickError(err)]++
	} else {
		f.ok++
	}
	return err
}

// tickError shortens a tick's error to the operation that failed.
func tickError(err error) string {
	msg := err.Error()
	for _, op := range []string{"DescribeAutoScalingGroups", "SetDesiredCapacity", "TerminateInstanceInAutoScalingGroup", "DescribeScalingActivities"} {
		if strings.Contains(msg, op) {
			return "Auto Scaling " + op
		}
	}
	if strings.Contains(msg, "DynamoDB") {
		return "DynamoDB"
	}
	if len(msg) > 60 {
		msg = msg[:60]
	}
	return msg
}

// maxDesired is the largest desired capacity the group was set to.
func (f *tickFigures) maxDesired(a *localaws.AutoScaling) int {
	most := 0
	for _, c := range a.Calls() {
		if c.Action == "SetDesiredCapacity" {
			if n, err := strconv.Atoi(c.Params.Get("DesiredCapacity")); err == nil && n > most {
				most = n
			}
		}
	}
	return most
}

func asgCalls(a *localaws.AutoScaling) map[string]int {
	out := map[string]int{}
	for _, c := range a.Calls() {
		out[c.Action]++
	}
	return out
}

// checkScaler holds the scaler to what it must do under faults: it ticked,
// it raised the group for the backlog (wake-on-enqueue or a tick got
// through), and once the faults stop one tick succeeds and leaves the
// group at the capacity it decided.
func checkScaler(t *testing.T, stack *devstack.Stack, c clock.Clock, a *localaws.AutoScaling, p *faultproxy.Proxy, f *tickFigures) {
	t.Helper()
	if f.ok+f.failed == 0 {
		t.Fatal("the scaler never ticked")
	}
	if got := f.maxDesired(a); got < 1 || got > 10 {
		t.Errorf("the group's desired capacity reached %d under a backlog, want 1..10 (max_instances)", got)
	}
	p.SetOptions(faultproxy.Options{Rate: 0})
	if err := f.run(stack, c); err != nil {
		t.Fatalf("a tick without faults failed: %v", err)
	}
	reports, err := stack.Scaler.Tick(context.Background())
	if err != nil || len(reports) != 1 {
		t.Fatalf("a tick without faults: %v %v", reports, err)
	}
	if got := a.Desired(group); got != reports[0].Desired {
		t.Errorf("the group's desired capacity is %d after a clean tick that decided %d", got, reports[0].Desired)
	}
}

var (
	sqsOps = []string{"SendMessage", "ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch", "GetQueueAttributes"}
	asgOps = []string{"DescribeAutoScalingGroups", "SetDesiredCapacity", "TerminateInstanceInAutoScalingGroup", "CompleteLifecycleAction", "RecordLifecycleActionHeartbeat", "DescribeScalingActivities"}
)

func sumCalls(p *faultproxy.Proxy, ops []string) int {
	n := 0
	for _, op := range ops {
		n += p.Calls(op)
	}
	return n
}

func errorCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}
