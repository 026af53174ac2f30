package interruption_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/service/interruption"
)

// drainEnv is a fleet whose instances run two agents each (one per GPU)
// and whose drain timeout is 10 minutes; store, handler and the event share
// one clock.
type drainEnv struct {
	*env
	agents map[string]worker.Auth
	tokens map[string]string // job id -> lease token
}

const drainCfgYAML = `
stage: test
fleets:
  - slug: gpu
    workflows: [render]
    instance_types: [g5.xlarge]
    lease_seconds: 300
    agent:
      drain_timeout: %s
`

func newDrainEnv(t *testing.T, drainTimeout string) *drainEnv {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 11, 22, 10, 20, 0, 0, time.UTC))
	e := &drainEnv{env: newBaseEnv(t, fmt.Sprintf(drainCfgYAML, drainTimeout), clk, clk, waitingHook),
		agents: map[string]worker.Auth{}, tokens: map[string]string{}}
	for _, id := range []string{instance + "-gpu0", instance + "-gpu1"} {
		e.agents[id] = e.register(id, instance, 1)
	}
	return e
}

// run leases a new job on the agent.
func (e *drainEnv) run(agent, id string) {
	e.t.Helper()
	if _, _, err := e.sys.Store.CreateJob(e.ctx, job.Spec{ID: id, TenantID: "t", WorkflowID: "render", Input: json.RawMessage(`{}`)}); err != nil {
		e.t.Fatal(err)
	}
	j, err := e.sys.Store.LeaseNext(e.ctx, e.agents[agent], []string{"render"})
	if err != nil || j.ID != id {
		e.t.Fatalf("lease %s on %s: %s, %v", id, agent, j.ID, err)
	}
	e.tokens[id] = j.LeaseToken
}

// finish reports the job done, as its agent does.
func (e *drainEnv) finish(agent, id string) {
	e.t.Helper()
	if err := e.sys.Store.Complete(e.ctx, e.agents[agent], id, e.tokens[id], json.RawMessage(`{"ok":true}`)); err != nil {
		e.t.Fatalf("complete %s: %v", id, err)
	}
}

// hook is the sample terminate lifecycle action, dated now.
func (e *drainEnv) hook() events.CloudWatchEvent {
	ev := sample(e.t, "asg-instance-terminate-lifecycle-action.json")
	ev.Time = e.clk.Now()
	return ev
}

// sweep advances the clock by d and runs the schedule's tick through the
// handler, as the Lambda gets it.
func (e *drainEnv) sweep(d time.Duration) []interruption.TerminationSummary {
	e.t.Helper()
	e.clk.Advance(d)
	tick := sample(e.t, "schedule-tick.json")
	s, err := e.h.Handle(e.ctx, tick)
	if err != nil {
		e.t.Fatalf("sweep: %v", err)
	}
	return s.Terminations
}

func outcome(ts []interruption.TerminationSummary) interruption.Outcome {
	if len(ts) != 1 {
		return interruption.Outcome(fmt.Sprintf("%d terminations", len(ts)))
	}
	return ts[0].Outcome
}

const (
	gpu0 = instance + "-gpu0"
	gpu1 = instance + "-gpu1"
)

func TestScaleInLetsRunningJobsFinishWhileTheActionIsHeartbeated(t *testing.T) {
	t.Parallel()
	e := newDrainEnv(t, "10m")
	e.run(gpu0, "j0")
	e.run(gpu1, "j1")
	start := e.clk.Now()
	s := e.handle(e.hook())
	if s.Completed || !s.Drained || s.Requeued != 0 || s.HeldUntil != start.Add(10*time.Minute).Format(time.RFC3339) ||
		strings.Join(s.Workers, ",") != gpu0+","+gpu1 {
		t.Fatalf("summary %+v: want both workers drained and the action held for 10m", s)
	}
	for _, id := range []string{gpu0, gpu1} {
		if w, _ := e.sys.Store.GetWorker(e.ctx, id); w.Status != worker.Draining {
			t.Fatalf("%s is %s, want draining", id, w.Status)
		}
	}
	if len(e.asg.LifecycleCompletions()) != 0 || e.job("j0").Status != job.Leased || e.job("j1").Status != job.Leased {
		t.Fatal("the action was completed or a job moved on a held termination")
	}
	// Redelivered: still held, the deadline unchanged.
	e.clk.Advance(30 * time.Second)
	if s := e.handle(e.hook()); s.HeldUntil != start.Add(10*time.Minute).Format(time.RFC3339) || !strings.Contains(s.Note, "held already") {
		t.Fatalf("redelivery: %+v", s)
	}
	// A minute in: nothing due. Two minutes in: one heartbeat.
	if got := outcome(e.sweep(30 * time.Second)); got != interruption.OutcomeWaiting {
		t.Fatalf("sweep at 1m: %s", got)
	}
	if got := outcome(e.sweep(time.Minute)); got != interruption.OutcomeHeartbeat {
		t.Fatalf("sweep at 2m: %s", got)
	}
	if got := outcome(e.sweep(time.Minute)); got != interruption.OutcomeWaiting {
		t.Fatalf("sweep at 3m: %s (heartbeated again too soon)", got)
	}
	e.finish(gpu0, "j0")
	if got := outcome(e.sweep(time.Minute)); got != interruption.OutcomeHeartbeat {
		t.Fatalf("sweep at 4m with j1 running: %s", got)
	}
	if hb := e.asg.LifecycleHeartbeats(); len(hb) != 2 || hb[0].InstanceID != instance || hb[0].Token != hookToken {
		t.Fatalf("heartbeats %+v, want two for the instance's action", hb)
	}
	e.finish(gpu1, "j1")
	if got := outcome(e.sweep(time.Minute)); got != interruption.OutcomeDrained {
		t.Fatalf("sweep after the last job: %s", got)
	}
	done := e.asg.LifecycleCompletions()
	if len(done) != 1 || done[0].InstanceID != instance || done[0].Result != "CONTINUE" {
		t.Fatalf("completions %+v, want one CONTINUE", done)
	}
	for _, id := range []string{"j0", "j1"} {
		if j := e.job(id); j.Status != job.Succeeded || j.Attempts != 1 || j.Preemptions != 0 {
			t.Fatalf("%s: %s after %d attempts, %d preemptions; want succeeded on its first", id, j.Status, j.Attempts, j.Preemptions)
		}
	}
	// Forgotten: the next sweep has nothing to do.
	if ts := e.sweep(time.Minute); len(ts) != 0 || len(e.asg.LifecycleCompletions()) != 1 {
		t.Fatalf("sweep after completion: %+v", ts)
	}
}

func TestDrainDeadlineRequeuesWithoutAnAttempt(t *testing.T) {
	t.Parallel()
	e := newDrainEnv(t, "5m")
	e.run(gpu0, "j0")
	e.run(gpu1, "j1")
	e.handle(e.hook())
	e.finish(gpu1, "j1")
	for i := range 4 {
		if got := outcome(e.sweep(time.Minute)); got == interruption.OutcomeDeadline || got == interruption.OutcomeDrained {
			t.Fatalf("sweep %d: %s before the deadline", i, got)
		}
	}
	ts := e.sweep(time.Minute)
	if outcome(ts) != interruption.OutcomeDeadline || ts[0].Requeued != 1 || ts[0].Leases != 1 {
		t.Fatalf("sweep at the deadline: %+v", ts)
	}
	if j := e.job("j0"); j.Status != job.Queued || j.Attempts != 0 || j.Preemptions != 1 {
		t.Fatalf("j0: %s attempts %d preemptions %d; want queued with no attempt spent", j.Status, j.Attempts, j.Preemptions)
	}
	if j := e.job("j1"); j.Status != job.Succeeded {
		t.Fatalf("j1: %s", j.Status)
	}
	if done := e.asg.LifecycleCompletions(); len(done) != 1 {
		t.Fatalf("completions %+v", done)
	}
}

func TestHeldActionThatLapsesRequeuesWhatRuns(t *testing.T) {
	t.Parallel()
	e := newDrainEnv(t, "30m")
	e.run(gpu0, "j0")
	e.handle(e.hook())
	// The group gives up waiting (the sweeps that heartbeat failed for
	// longer than the hook's heartbeat timeout): the instance is going.
	e.asg.EndLifecycleWait(instance)
	ts := e.sweep(2 * time.Minute)
	if outcome(ts) != interruption.OutcomeLapsed || ts[0].Requeued != 1 {
		t.Fatalf("sweep: %+v", ts)
	}
	if j := e.job("j0"); j.Status != job.Queued || j.Attempts != 0 {
		t.Fatalf("j0: %s attempts %d", j.Status, j.Attempts)
	}
	if ts := e.sweep(time.Minute); len(ts) != 0 {
		t.Fatalf("a lapsed termination is still held: %+v", ts)
	}
}

func TestInstanceThatDiesFirstEndsItsHeldAction(t *testing.T) {
	t.Parallel()
	e := newDrainEnv(t, "30m")
	e.run(gpu0, "j0")
	e.run(gpu1, "j1")
	e.handle(e.hook())
	s := e.handle(sample(t, "ec2-instance-state-change-terminated.json"))
	if s.Requeued != 2 || !s.Removed || len(s.Workers) != 2 {
		t.Fatalf("terminated: %+v", s)
	}
	if got := outcome(e.sweep(time.Minute)); got != interruption.OutcomeDrained {
		t.Fatalf("sweep: %s", got)
	}
	if ts := e.sweep(time.Minute); len(ts) != 0 {
		t.Fatalf("still held: %+v", ts)
	}
}

func TestIdleInstanceIsCompletedAtOnce(t *testing.T) {
	t.Parallel()
	e := newDrainEnv(t, "10m")
	s := e.handle(e.hook())
	if !s.Completed || !s.Drained || s.HeldUntil != "" || len(s.Workers) != 2 {
		t.Fatalf("summary %+v: want drained and completed at once", s)
	}
	if ts := e.sweep(time.Minute); len(ts) != 0 {
		t.Fatalf("an idle instance was held: %+v", ts)
	}
}

func TestLateHookPastItsDeadlineIsNotHeld(t *testing.T) {
	t.Parallel()
	e := newDrainEnv(t, "1m")
	e.run(gpu0, "j0")
	ev := e.hook()
	e.clk.Advance(2 * time.Minute) // delivered after the drain timeout
	s := e.handle(ev)
	if !s.Completed || s.Requeued != 1 || s.HeldUntil != "" {
		t.Fatalf("summary %+v: want requeued and completed", s)
	}
}

func TestSweepFailureKeepsTheTerminationHeld(t *testing.T) {
	t.Parallel()
	e := newDrainEnv(t, "10m")
	e.run(gpu0, "j0")
	e.handle(e.hook())
	e.finish(gpu0, "j0")
	e.asg.FailNext("CompleteLifecycleAction", 1, localaws.ASGError{Status: 500, Code: "InternalFailure", Message: "boom"})
	e.clk.Advance(time.Minute)
	s, err := e.h.Handle(e.ctx, sample(t, "schedule-tick.json"))
	if err == nil || !strings.Contains(err.Error(), "InternalFailure") || outcome(s.Terminations) != interruption.OutcomeFailed {
		t.Fatalf("sweep: %+v, %v; want the failure", s, err)
	}
	if got := outcome(e.sweep(time.Minute)); got != interruption.OutcomeDrained || len(e.asg.LifecycleCompletions()) != 1 {
		t.Fatalf("next sweep: %s, completions %+v", got, e.asg.LifecycleCompletions())
	}
}

func TestHeartbeatFailureIsRetriedNextSweep(t *testing.T) {
	t.Parallel()
	e := newDrainEnv(t, "10m")
	e.run(gpu0, "j0")
	e.handle(e.hook())
	e.asg.FailNext("RecordLifecycleActionHeartbeat", 1, localaws.ASGError{Status: 400, Code: "Throttling", Message: "Rate exceeded"})
	e.clk.Advance(2 * time.Minute)
	if _, err := e.h.Sweep(e.ctx); err == nil {
		t.Fatal("a failed heartbeat was not reported")
	}
	if got := outcome(e.sweep(time.Minute)); got != interruption.OutcomeHeartbeat {
		t.Fatalf("next sweep: %s", got)
	}
}

// Every event kind handles every agent of the instance.
func TestEveryEventHandlesEveryAgentOfTheInstance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sample   string
		requeued int
		job      job.Status    // of each agent's job after the event
		worker   worker.Status // of each agent after it; "" removed
	}{
		{"ec2-spot-interruption-warning.json", 2, job.Queued, worker.Draining},
		{"ec2-capacity-reservation-interruption-warning.json", 2, job.Queued, worker.Draining},
		{"ec2-rebalance-recommendation.json", 0, job.Leased, worker.Active},
		{"ec2-instance-state-change-stopping.json", 2, job.Queued, worker.Draining},
		{"ec2-instance-state-change-stopped.json", 2, job.Queued, ""},
		{"ec2-instance-state-change-terminated.json", 2, job.Queued, ""},
		{"asg-instance-terminate-lifecycle-action.json", 0, job.Leased, worker.Draining},
		{"aws-health-scheduled-change.json", 0, job.Leased, worker.Draining},
	} {
		t.Run(c.sample, func(t *testing.T) {
			e := newDrainEnv(t, "10m")
			e.run(gpu0, "j0")
			e.run(gpu1, "j1")
			ev := sample(t, c.sample)
			ev.Time = e.clk.Now()
			s := e.handle(ev)
			if s.Requeued != c.requeued || strings.Join(s.Workers, ",") != gpu0+","+gpu1 {
				t.Fatalf("summary %+v: want %d requeued over both workers", s, c.requeued)
			}
			for agent, id := range map[string]string{gpu0: "j0", gpu1: "j1"} {
				if j := e.job(id); j.Status != c.job || (c.job == job.Queued && j.Attempts != 0) {
					t.Errorf("%s: %s attempts %d, want %s", id, j.Status, j.Attempts, c.job)
				}
				w, err := e.sys.Store.GetWorker(e.ctx, agent)
				switch {
				case c.worker == "" && !errors.Is(err, fault.ErrNotFound):
					t.Errorf("%s not removed: %v", agent, err)
				case c.worker != "" && (err != nil || w.Status != c.worker):
					t.Errorf("%s: %s, %v; want %s", agent, w.Status, err, c.worker)
				}
			}
		})
	}
}

func TestTestNotificationIsANoOp(t *testing.T) {
	t.Parallel()
	e := newDrainEnv(t, "10m")
	e.run(gpu0, "j0")
	s, err := e.h.Handle(e.ctx, sample(t, "asg-test-notification.json"))
	if err != nil || s.Kind != interruption.KindTestNotification || !strings.Contains(s.Note, "test notification") || len(s.Workers) != 0 {
		t.Fatalf("summary %+v, %v", s, err)
	}
	if len(e.asg.Calls()) != 0 || e.job("j0").Status != job.Leased {
		t.Fatal("a test notification changed something")
	}
}
