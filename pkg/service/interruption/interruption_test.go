package interruption_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	samples "github.com/fleetq/fleetq/events"
	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/interruption"
	"github.com/fleetq/fleetq/pkg/service/system"
)

// The samples name this instance and lifecycle action.
const (
	instance  = "i-0abc1234def567890"
	hookToken = "87654321-4321-4321-4321-210987654321"
)

const cfgYAML = `
stage: test
fleets:
  - slug: gpu
    workflows: [render]
    instance_types: [g5.xlarge]
    lease_seconds: 300
`

type env struct {
	t    *testing.T
	ctx  context.Context
	sys  *system.Env
	h    *interruption.Handler
	asg  *localaws.AutoScaling
	clk  *clock.Fake
	auth worker.Auth
	// requests counts the DynamoDB requests of the store's client.
	requests *atomic.Int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := newBaseEnv(t, cfgYAML, clock.NewFake(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)),
		clock.NewFake(time.Date(2026, 11, 22, 12, 34, 0, 0, time.UTC)), waitingHook)
	e.auth = e.register("w1", instance, 2)
	return e
}

// newBaseEnv is the composition root's store on cfgText's fleets (on
// storeClk), the fake Auto Scaling API set up by groups, and the handler on
// them (on clk).
func newBaseEnv(t *testing.T, cfgText string, storeClk, clk *clock.Fake, groups func(*localaws.AutoScaling)) *env {
	t.Helper()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	requests := new(atomic.Int64)
	client, table := testenv.DynamoDB(t, testenv.Counter(requests))
	sys, err := system.New(cfg, client, table, storeClk, slog.New(slog.DiscardHandler), nil, system.LeaseSpread(1))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	groups(srv)
	ad := asg.New(autoscaling.NewFromConfig(localaws.Config(srv.URL), asg.WithoutSDKRetries), asg.Options{Retries: -1})
	return &env{t: t, ctx: context.Background(), sys: sys, asg: srv, clk: clk, requests: requests,
		h: newHandler(t, sys.Store, ad, clk, slog.New(slog.DiscardHandler))}
}

// waitingHook is the stage's group with the instance waiting on its
// terminate hook.
func waitingHook(srv *localaws.AutoScaling) {
	srv.PutGroup(localaws.ASGGroup{Name: "fleetq-dev-demo", Max: 3, Desired: 1, LifecycleHooks: []string{"fleetq-drain"}})
	srv.AddInstance("fleetq-dev-demo", localaws.ASGInstance{ID: instance, LifecycleState: "Terminating:Wait", LifecycleToken: hookToken})
}

// register registers worker id of fleet gpu on inst.
func (e *env) register(id, inst string, maxConcurrency int) worker.Auth {
	e.t.Helper()
	a := worker.Auth{WorkerID: id, Fleet: "gpu", TokenHash: "h-" + id}
	if _, err := e.sys.Store.RegisterWorker(e.ctx, worker.Registration{WorkerID: id, Fleet: "gpu", Stage: "test", InstanceID: inst,
		InstanceType: "g5.xlarge", AZ: "us-east-1a", MaxConcurrency: maxConcurrency, TokenHash: a.TokenHash}); err != nil {
		e.t.Fatal(err)
	}
	return a
}

// leased submits and leases a job on the instance's worker.
func (e *env) leased(id string) job.Job {
	e.t.Helper()
	if _, _, err := e.sys.Store.CreateJob(e.ctx, job.Spec{ID: id, TenantID: "t", WorkflowID: "render", Input: json.RawMessage(`{}`)}); err != nil {
		e.t.Fatal(err)
	}
	j, err := e.sys.Store.LeaseNext(e.ctx, e.auth, []string{"render"})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func sample(t *testing.T, name string) events.CloudWatchEvent {
	t.Helper()
	b, err := samples.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func (e *env) handle(ev events.CloudWatchEvent) interruption.Summary {
	e.t.Helper()
	s, err := e.h.Handle(e.ctx, ev)
	if err != nil {
		e.t.Fatalf("%s: %v", ev.DetailType, err)
	}
	return s
}

func (e *env) job(id string) job.Job {
	e.t.Helper()
	j, err := e.sys.Store.GetJob(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func TestSpotWarningRequeuesWithoutAnAttemptOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.leased("j1")
	ev := sample(t, "ec2-spot-interruption-warning.json")
	s := e.handle(ev)
	if !s.Drained || s.Requeued != 1 || s.WorkerID != "w1" {
		t.Fatalf("summary %+v", s)
	}
	j := e.job("j1")
	if j.Status != job.Queued || j.Attempts != 0 || j.Preemptions != 1 {
		t.Fatalf("job after the warning: %s attempts %d preemptions %d", j.Status, j.Attempts, j.Preemptions)
	}
	w, _ := e.sys.Store.GetWorker(e.ctx, "w1")
	if w.Status != worker.Draining || w.Leases != 0 {
		t.Fatalf("worker %+v", w)
	}
	// Delivered twice: nothing more happens, and it is counted once.
	if s := e.handle(ev); s.Requeued != 0 {
		t.Fatalf("duplicate requeued %d", s.Requeued)
	}
	if j := e.job("j1"); j.Preemptions != 1 {
		t.Fatalf("duplicate counted another preemption: %d", j.Preemptions)
	}
	counts, err := e.sys.Store.InterruptionCounts(e.ctx, "gpu", ev.Time.Add(-time.Hour))
	if err != nil || len(counts) != 1 || counts[0].Count != 1 || counts[0].Kind != fleetstate.InterruptSpot ||
		counts[0].InstanceType != "g5.xlarge" || counts[0].AZ != "us-east-1a" {
		t.Fatalf("interruption counts %+v, %v", counts, err)
	}
	if n, _ := e.sys.Store.SpotInterruptions(e.ctx, "gpu", ev.Time.Add(-time.Minute)); n != 1 {
		t.Fatalf("spot interruptions %d", n)
	}
	// A drained worker leases nothing.
	if _, err := e.sys.Store.LeaseNext(e.ctx, e.auth, []string{"render"}); err == nil {
		t.Fatal("a drained worker leased a job")
	}
}

func TestRebalanceIsCountedButDrainsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.leased("j1")
	ev := sample(t, "ec2-rebalance-recommendation.json")
	s := e.handle(ev)
	if s.Drained || s.Requeued != 0 || s.WorkerID != "w1" {
		t.Fatalf("summary %+v", s)
	}
	if j := e.job("j1"); j.Status != job.Leased {
		t.Fatalf("job %s, want still leased", j.Status)
	}
	if w, _ := e.sys.Store.GetWorker(e.ctx, "w1"); w.Status != worker.Active {
		t.Fatalf("worker %s, want active: the group's capacity rebalance replaces it", w.Status)
	}
	if s.Outcome != interruption.OutcomeCounted {
		t.Fatalf("outcome %q, want counted", s.Outcome)
	}
	// Delivered again: said to be a duplicate, and counted once.
	if s := e.handle(ev); s.Outcome != interruption.OutcomeDuplicate || s.WorkerID != "w1" {
		t.Fatalf("redelivered: %+v", s)
	}
	counts, err := e.sys.Store.InterruptionCounts(e.ctx, "gpu", ev.Time.Add(-time.Hour))
	if err != nil || len(counts) != 1 || counts[0].Kind != fleetstate.InterruptRebalance || counts[0].Count != 1 {
		t.Fatalf("counts %+v, %v", counts, err)
	}
}

// A scheduled change delivered again drained its workers the first time:
// the second delivery says it is a duplicate.
func TestScheduledChangeRedeliveredIsADuplicate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.leased("j1")
	ev := sample(t, "aws-health-scheduled-change.json")
	if s := e.handle(ev); s.Outcome != interruption.OutcomeDraining || !s.Drained || s.Requeued != 0 {
		t.Fatalf("first delivery: %+v", s)
	}
	if s := e.handle(ev); s.Outcome != interruption.OutcomeDuplicate || !strings.Contains(s.Note, "already") {
		t.Fatalf("redelivered: %+v", s)
	}
	if j := e.job("j1"); j.Status != job.Leased {
		t.Fatalf("job %s, want still running", j.Status)
	}
}

func TestTerminatedRemovesTheWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.leased("j1")
	ev := sample(t, "ec2-instance-state-change-terminated.json")
	s := e.handle(ev)
	if !s.Removed || s.Requeued != 1 || s.Outcome != interruption.OutcomeRemoved {
		t.Fatalf("summary %+v", s)
	}
	if _, err := e.sys.Store.GetWorker(e.ctx, "w1"); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("worker still there: %v", err)
	}
	if j := e.job("j1"); j.Status != job.Queued || j.Attempts != 0 {
		t.Fatalf("job %s attempts %d", j.Status, j.Attempts)
	}
	// Again, and a late Spot warning after it (out of order): no-ops.
	if s := e.handle(ev); s.WorkerID != "" || !strings.Contains(s.Note, "no worker") || s.Outcome != interruption.OutcomeNoWorker {
		t.Fatalf("duplicate: %+v", s)
	}
	if s := e.handle(sample(t, "ec2-spot-interruption-warning.json")); s.Requeued != 0 || s.WorkerID != "" {
		t.Fatalf("late warning: %+v", s)
	}
	// A running state needs nothing.
	running := ev
	running.Detail = json.RawMessage(`{"instance-id":"` + instance + `","state":"running"}`)
	if s := e.handle(running); s.WorkerID != "" || s.Outcome != interruption.OutcomeIgnored {
		t.Fatalf("running: %+v", s)
	}
}

func TestTerminateLifecycleActionCompletesAfterRequeue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.leased("j1")
	s := e.handle(sample(t, "asg-instance-terminate-lifecycle-action.json"))
	if !s.Drained || s.Requeued != 1 || !s.Completed || s.Outcome != interruption.OutcomeCompleted {
		t.Fatalf("summary %+v", s)
	}
	done := e.asg.LifecycleCompletions()
	if len(done) != 1 || done[0].Token != hookToken || done[0].Result != "CONTINUE" {
		t.Fatalf("lifecycle completions %+v", done)
	}
	// Delivered again: the action is no longer active, which is done too.
	if s := e.handle(sample(t, "asg-instance-terminate-lifecycle-action.json")); s.Completed || !strings.Contains(s.Note, "already") ||
		s.Outcome != interruption.OutcomeLapsed {
		t.Fatalf("duplicate: %+v", s)
	}
	// An instance without a worker still has its action completed.
	e2 := newEnv(t)
	e2.asg.AddInstance("fleetq-dev-demo", localaws.ASGInstance{ID: "i-unknown", LifecycleState: "Terminating:Wait", LifecycleToken: hookToken})
	ev := sample(t, "asg-instance-terminate-lifecycle-action.json")
	ev.Detail = json.RawMessage(strings.ReplaceAll(string(ev.Detail), instance, "i-unknown"))
	if s := e2.handle(ev); !s.Completed || s.WorkerID != "" {
		t.Fatalf("unknown instance: %+v", s)
	}
}

// state is what an event can change: the job, the worker, the counts and
// the Auto Scaling requests.
type state struct {
	job       job.Status
	worker    worker.Status
	leases    int
	counts    int
	asgCalls  int
	completed int
}

func (e *env) state(jobID string) state {
	e.t.Helper()
	w, err := e.sys.Store.GetWorker(e.ctx, "w1")
	if err != nil {
		e.t.Fatal(err)
	}
	counts, err := e.sys.Store.InterruptionCounts(e.ctx, "gpu", time.Time{})
	if err != nil {
		e.t.Fatal(err)
	}
	return state{job: e.job(jobID).Status, worker: w.Status, leases: w.Leases, counts: len(counts),
		asgCalls: len(e.asg.Calls()), completed: len(e.asg.LifecycleCompletions())}
}

func TestUnsupportedAndMalformedEventsChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.leased("j1")
	before := e.state("j1")
	withDetail := func(name, detail string) events.CloudWatchEvent {
		ev := sample(t, name)
		ev.Detail = json.RawMessage(detail)
		return ev
	}
	withSource := func(name, source string) events.CloudWatchEvent {
		ev := sample(t, name)
		ev.Source = source
		return ev
	}
	hook := sample(t, "asg-instance-terminate-lifecycle-action.json")
	for _, c := range []struct {
		name string
		ev   events.CloudWatchEvent
		want error
		says string // the error names what is wrong
	}{
		{"unknown detail type", events.CloudWatchEvent{Source: "aws.ec2", DetailType: "EC2 Something", Detail: json.RawMessage(`{"instance-id":"` + instance + `"}`)},
			interruption.ErrUnsupported, "EC2 Something"},
		{"no detail type", events.CloudWatchEvent{Source: "aws.ec2", Detail: json.RawMessage(`{"instance-id":"` + instance + `"}`)}, interruption.ErrUnsupported, "aws.ec2"},
		{"spot warning from another source", withSource("ec2-spot-interruption-warning.json", "custom.app"), interruption.ErrUnsupported, "custom.app"},
		{"lifecycle action from aws.ec2", withSource("asg-instance-terminate-lifecycle-action.json", "aws.ec2"), interruption.ErrUnsupported, "aws.autoscaling"},
		{"spot warning without instance-id", withDetail("ec2-spot-interruption-warning.json", `{}`), interruption.ErrMalformed, "instance-id"},
		{"spot warning with no detail", withDetail("ec2-spot-interruption-warning.json", ``), interruption.ErrMalformed, "no detail"},
		{"spot warning with null detail", withDetail("ec2-spot-interruption-warning.json", `null`), interruption.ErrMalformed, "no detail"},
		{"spot warning with a numeric instance-id", withDetail("ec2-spot-interruption-warning.json", `{"instance-id":7}`), interruption.ErrMalformed, "instance-id"},
		{"rebalance with a list for detail", withDetail("ec2-rebalance-recommendation.json", `["`+instance+`"]`), interruption.ErrMalformed, "Rebalance"},
		{"rebalance with broken JSON", withDetail("ec2-rebalance-recommendation.json", `{"instance-id":`), interruption.ErrMalformed, "Rebalance"},
		{"state change without state", withDetail("ec2-instance-state-change-terminated.json", `{"instance-id":"`+instance+`"}`), interruption.ErrMalformed, "state"},
		{"lifecycle action without group", withDetail("asg-instance-terminate-lifecycle-action.json",
			strings.Replace(string(hook.Detail), `"AutoScalingGroupName"`, `"Group"`, 1)), interruption.ErrMalformed, "AutoScalingGroupName"},
		{"lifecycle action without hook", withDetail("asg-instance-terminate-lifecycle-action.json",
			strings.Replace(string(hook.Detail), `"LifecycleHookName"`, `"Hook"`, 1)), interruption.ErrMalformed, "LifecycleHookName"},
		{"lifecycle action without instance", withDetail("asg-instance-terminate-lifecycle-action.json",
			strings.Replace(string(hook.Detail), `"EC2InstanceId"`, `"Instance"`, 1)), interruption.ErrMalformed, "EC2InstanceId"},
		{"launch transition in a terminate action", withDetail("asg-instance-terminate-lifecycle-action.json",
			strings.Replace(string(hook.Detail), "EC2_INSTANCE_TERMINATING", "EC2_INSTANCE_LAUNCHING", 1)), interruption.ErrMalformed, "EC2_INSTANCE_LAUNCHING"},
	} {
		s, err := e.h.Handle(e.ctx, c.ev)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: err = %v, want %v naming %q", c.name, err, c.want, c.says)
		}
		if s.WorkerID != "" || s.Drained || s.Requeued != 0 || s.Removed || s.Completed {
			t.Errorf("%s: summary %+v", c.name, s)
		}
		if after := e.state("j1"); after != before {
			t.Errorf("%s: changed %+v to %+v", c.name, before, after)
		}
	}
}

// An AWS Health scheduled change that names no instance (a Dedicated
// Host's, or one without affected entities) matches the Health rule; the
// handler answers it with success and one log line, so Lambda does not
// retry it and it never reaches the failed-events queue, and changes
// nothing.
func TestHealthEventWithoutAnInstanceIsLoggedAndAnswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.leased("j1")
	before := e.state("j1")
	for _, name := range []string{"corpus/nth-scheduled-change-dedicated-host.json", "corpus/nth-scheduled-change-no-entity.json"} {
		b, err := samples.Corpus.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.CloudWatchEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		h := newHandler(t, e.sys.Store, interruption.NoAutoScaling, e.clk, slog.New(slog.NewJSONHandler(&logs, nil)))
		s, err := h.Handle(e.ctx, ev)
		if err != nil || s.Kind != interruption.KindNoInstance || s.Drained || s.Requeued != 0 || s.Note == "" {
			t.Errorf("%s: summary %+v, err %v; want %s handled without an error", name, s, err, interruption.KindNoInstance)
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], "AWS_EC2_DEDICATED_HOST_NETWORK_MAINTENANCE_SCHEDULED") {
			t.Errorf("%s: logged %q, want one line naming the event type", name, logs.String())
		}
		if after := e.state("j1"); after != before {
			t.Errorf("%s: changed %+v to %+v", name, before, after)
		}
	}
}

func TestEventWithoutTimeIsDatedByTheClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ev := sample(t, "ec2-spot-interruption-warning.json")
	ev.Time = time.Time{}
	if s := e.handle(ev); !s.Drained {
		t.Fatalf("summary %+v", s)
	}
	counts, err := e.sys.Store.InterruptionCounts(e.ctx, "gpu", time.Time{})
	if err != nil || len(counts) != 1 || counts[0].Minute != "20261122T1234" {
		t.Fatalf("counts %+v, %v: want one in the clock's minute 20261122T1234", counts, err)
	}
	// An event with its own time keeps it.
	e.clk.Advance(time.Hour)
	ev = sample(t, "ec2-rebalance-recommendation.json")
	e.handle(ev)
	counts, _ = e.sys.Store.InterruptionCounts(e.ctx, "gpu", time.Time{})
	minutes := map[string]bool{}
	for _, c := range counts {
		minutes[c.Minute] = true
	}
	if !minutes[ev.Time.UTC().Format("20060102T1504")] || minutes["20261122T1334"] {
		t.Fatalf("counts %+v: want the rebalance in its own minute %s", counts, ev.Time)
	}
}

func TestTerminateLifecycleActionFailureIsReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.asg.FailNext("CompleteLifecycleAction", 1, localaws.ASGError{Status: 500, Code: "InternalFailure", Message: "boom"})
	_, err := e.h.Handle(e.ctx, sample(t, "asg-instance-terminate-lifecycle-action.json"))
	if err == nil || errors.Is(err, asg.ErrNoActiveLifecycleAction) || !strings.Contains(err.Error(), "InternalFailure") {
		t.Fatalf("err = %v, want the service's failure", err)
	}
	// Redelivered (EventBridge retries): completed this time.
	if s := e.handle(sample(t, "asg-instance-terminate-lifecycle-action.json")); !s.Completed {
		t.Fatalf("retry: %+v", s)
	}
	// An unknown group is an error, not "already completed".
	ev := sample(t, "asg-instance-terminate-lifecycle-action.json")
	ev.Detail = json.RawMessage(strings.ReplaceAll(string(ev.Detail), "fleetq-dev-demo", "fleetq-dev-gone"))
	if _, err := e.h.Handle(e.ctx, ev); err == nil || errors.Is(err, asg.ErrNoActiveLifecycleAction) {
		t.Fatalf("unknown group: err = %v", err)
	}
}

func TestNoAutoScalingLeavesTheActionToTimeOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.leased("j1")
	h := newHandler(t, e.sys.Store, interruption.NoAutoScaling, e.clk, slog.New(slog.DiscardHandler))
	s, err := h.Handle(e.ctx, sample(t, "asg-instance-terminate-lifecycle-action.json"))
	if err != nil || !s.Drained || s.Requeued != 1 || s.Completed || !strings.Contains(s.Note, "times out on its own") || s.Outcome != interruption.OutcomeRequeued {
		t.Fatalf("summary %+v, %v", s, err)
	}
	if n := len(e.asg.Calls()); n != 0 {
		t.Fatalf("%d Auto Scaling requests", n)
	}
}

func TestNewRequiresEveryDependency(t *testing.T) {
	t.Parallel()
	st, log := struct{ interruption.Store }{}, slog.New(slog.DiscardHandler)
	for name, f := range map[string]func() (*interruption.Handler, error){
		"store": func() (*interruption.Handler, error) {
			return interruption.New(nil, interruption.NoAutoScaling, clock.Real{}, log, interruption.Config{})
		},
		"lifecycle": func() (*interruption.Handler, error) {
			return interruption.New(st, nil, clock.Real{}, log, interruption.Config{})
		},
		"clock": func() (*interruption.Handler, error) {
			return interruption.New(st, interruption.NoAutoScaling, nil, log, interruption.Config{})
		},
		"logger": func() (*interruption.Handler, error) {
			return interruption.New(st, interruption.NoAutoScaling, clock.Real{}, nil, interruption.Config{})
		},
		"heartbeat": func() (*interruption.Handler, error) {
			return interruption.New(st, interruption.NoAutoScaling, clock.Real{}, log, interruption.Config{HeartbeatEvery: -time.Second})
		},
	} {
		if h, err := f(); err == nil || h != nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New without a good %s: %v, %v", name, h, err)
		}
	}
	if h, err := interruption.New(st, interruption.NoAutoScaling, clock.Real{}, log, interruption.Config{}); err != nil || h == nil {
		t.Fatalf("New with every dependency: %v, %v", h, err)
	}
}

// newHandler is interruption.New with the default settings.
func newHandler(t *testing.T, st interruption.Store, lc interruption.Lifecycle, clk clock.Clock, log *slog.Logger) *interruption.Handler {
	t.Helper()
	h, err := interruption.New(st, lc, clk, log, interruption.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The agent's own requeue and the warning race on each job: one of them
// moves it, once.
func TestRaceWithTheAgentsRequeue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ev := sample(t, "ec2-spot-interruption-warning.json")
	for i := range 10 {
		id := fmt.Sprintf("r%d", i)
		j := e.leased(id)
		var wg sync.WaitGroup
		var agentErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, agentErr = e.sys.Store.Requeue(e.ctx, e.auth, id, j.LeaseToken, job.SpotInterruption)
		}()
		go func() { defer wg.Done(); _, _ = e.h.Handle(e.ctx, ev) }()
		wg.Wait()
		got := e.job(id)
		if got.Status != job.Queued || got.Preemptions != 1 || got.Attempts != 0 {
			t.Fatalf("round %d: %s preemptions %d attempts %d (agent: %v)", i, got.Status, got.Preemptions, got.Attempts, agentErr)
		}
		if agentErr != nil && !errors.Is(agentErr, fault.ErrLeaseLost) {
			t.Fatalf("round %d: agent's requeue: %v", i, agentErr)
		}
		// Back to active for the next round (the warning drained it).
		if _, err := e.sys.Store.RemoveWorker(e.ctx, "w1", job.ReasonWorkerGone); err != nil {
			t.Fatal(err)
		}
		e.auth = e.register("w1", instance, 2)
		if _, err := e.sys.Store.Cancel(e.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}
