package interruption_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	samples "github.com/fleetq/fleetq/events"
	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/service/interruption"
)

// elsewhere is where the agents run for an event that names no instance.
const elsewhere = "i-0e15e3e0e0e0e0e0e"

// instanceOf is the instance an event names, whether or not the handler
// takes the event; elsewhere for one that names none.
func instanceOf(t *testing.T, ev events.CloudWatchEvent) string {
	t.Helper()
	if m, err := interruption.Parse(ev); err == nil {
		if m.Kind() == interruption.KindNoInstance {
			return elsewhere
		}
		return m.InstanceID()
	}
	var d map[string]any
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"EC2InstanceId", "instance-id"} {
		if s, ok := d[k].(string); ok {
			return s
		}
	}
	t.Fatalf("%s names no instance", ev.DetailType)
	return ""
}

// Every real event in events/corpus/ through the handler Lambda runs, with
// the effect it should have on two agents of the instance it names.
func TestRealEventCorpus(t *testing.T) {
	t.Parallel()
	type effect struct {
		err      error // the handler's answer (nil: handled)
		kind     interruption.Kind
		requeued int        // jobs requeued by the event
		job      job.Status // each agent's job after it
		worker   worker.Status
		held     bool // a terminate lifecycle action held while the jobs run
		outcome  interruption.Outcome
	}
	handled := func(k interruption.Kind, o interruption.Outcome, requeued int, js job.Status, ws worker.Status) effect {
		return effect{kind: k, outcome: o, requeued: requeued, job: js, worker: ws}
	}
	want := map[string]effect{
		"lambda-go-autoscaling-event-terminate-action.json":      {kind: interruption.KindTerminateAction, outcome: interruption.OutcomeHeld, job: job.Leased, worker: worker.Draining, held: true},
		"lambda-go-autoscaling-event-lifecycle-action.json":      {err: interruption.ErrUnsupported, job: job.Leased, worker: worker.Active},
		"nth-spot-itn-event.json":                                handled(interruption.KindSpotWarning, interruption.OutcomeRequeued, 2, job.Queued, worker.Draining),
		"nth-rebalance-recommendation-event.json":                handled(interruption.KindRebalance, interruption.OutcomeCounted, 0, job.Leased, worker.Active),
		"nth-ec2-state-change-event.json":                        handled(interruption.KindInstanceState, interruption.OutcomeIgnored, 0, job.Leased, worker.Active),
		"nth-asg-lifecycle-event.json":                           {kind: interruption.KindTerminateAction, outcome: interruption.OutcomeHeld, job: job.Leased, worker: worker.Draining, held: true},
		"nth-scheduled-change-event.json":                        handled(interruption.KindScheduledChange, interruption.OutcomeDraining, 0, job.Leased, worker.Draining),
		"nth-scheduled-change-dedicated-host.json":               handled(interruption.KindNoInstance, interruption.OutcomeIgnored, 0, job.Leased, worker.Active),
		"nth-scheduled-change-no-entity.json":                    handled(interruption.KindNoInstance, interruption.OutcomeIgnored, 0, job.Leased, worker.Active),
		"karpenter-spot-interruption.json":                       handled(interruption.KindSpotWarning, interruption.OutcomeRequeued, 2, job.Queued, worker.Draining),
		"karpenter-state-change-stopped.json":                    handled(interruption.KindInstanceEnding, interruption.OutcomeRemoved, 2, job.Queued, ""),
		"karpenter-state-change-creating.json":                   handled(interruption.KindInstanceState, interruption.OutcomeIgnored, 0, job.Leased, worker.Active),
		"karpenter-scheduled-change.json":                        handled(interruption.KindScheduledChange, interruption.OutcomeDraining, 0, job.Leased, worker.Draining),
		"awsdocs-capacity-reservation-interruption-warning.json": handled(interruption.KindReservationWarning, interruption.OutcomeRequeued, 2, job.Queued, worker.Draining),
	}
	names, err := fs.Glob(samples.Corpus, "corpus/*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("corpus: %v, %v", names, err)
	}
	for _, name := range names {
		base := name[len("corpus/"):]
		w, ok := want[base]
		if !ok {
			t.Errorf("%s has no expected effect", name)
			continue
		}
		delete(want, base)
		t.Run(base, func(t *testing.T) {
			b, _ := samples.Corpus.ReadFile(name)
			var ev events.CloudWatchEvent
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatal(err)
			}
			e := newCorpusEnv(t, ev)
			ev.Time = e.clk.Now() // delivered live
			s, err := e.h.Handle(e.ctx, ev)
			switch {
			case w.err != nil && !errors.Is(err, w.err):
				t.Fatalf("err = %v, want %v", err, w.err)
			case w.err == nil && err != nil:
				t.Fatalf("err = %v", err)
			}
			if s.Kind != w.kind || s.Outcome != w.outcome || s.Requeued != w.requeued || (s.HeldUntil != "") != w.held || s.Completed {
				t.Errorf("summary %+v, want kind %q, outcome %q, %d requeued, held %v", s, w.kind, w.outcome, w.requeued, w.held)
			}
			for _, a := range e.agents {
				if j := e.job(a.job); j.Status != w.job || j.Attempts > 1 || (w.job == job.Queued && j.Attempts != 0) {
					t.Errorf("%s: %s after %d attempts, want %s", a.job, j.Status, j.Attempts, w.job)
				}
				got, err := e.sys.Store.GetWorker(e.ctx, a.id)
				switch {
				case w.worker == "" && !errors.Is(err, fault.ErrNotFound):
					t.Errorf("%s not removed: %v", a.id, err)
				case w.worker != "" && (err != nil || got.Status != w.worker):
					t.Errorf("%s: %s, %v; want %s", a.id, got.Status, err, w.worker)
				}
			}
			if len(e.asg.LifecycleCompletions()) != 0 {
				t.Errorf("completed %+v with jobs running", e.asg.LifecycleCompletions())
			}
			// A held action is completed once the jobs are done.
			if w.held {
				for _, a := range e.agents {
					if err := e.sys.Store.Complete(e.ctx, a.auth, a.job, a.token, json.RawMessage(`{}`)); err != nil {
						t.Fatal(err)
					}
				}
				e.clk.Advance(time.Minute)
				if ts, err := e.h.Sweep(e.ctx); err != nil || outcome(ts) != interruption.OutcomeDrained || len(e.asg.LifecycleCompletions()) != 1 {
					t.Fatalf("sweep: %+v, %v; completions %+v", ts, err, e.asg.LifecycleCompletions())
				}
			}
		})
	}
	for name := range want {
		t.Errorf("no corpus/%s", name)
	}
}

type corpusAgent struct {
	id, job, token string
	auth           worker.Auth
}

type corpusEnv struct {
	*env
	agents []corpusAgent
}

// newCorpusEnv is a fleet with a 10-minute drain timeout and two agents,
// each running a job, on the instance ev names; the clock (and the event's
// time) is now; a terminate lifecycle action's group, hook and waiting
// instance exist in the fake Auto Scaling API.
func newCorpusEnv(t *testing.T, ev events.CloudWatchEvent) *corpusEnv {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 11, 22, 10, 20, 0, 0, time.UTC))
	e := &corpusEnv{env: newBaseEnv(t, fmt.Sprintf(drainCfgYAML, "10m"), clk, clk, func(srv *localaws.AutoScaling) {
		if m, err := interruption.Parse(ev); err == nil {
			if hook, ok := m.(interruption.TerminateLifecycleAction); ok {
				srv.PutGroup(localaws.ASGGroup{Name: hook.Group, Max: 3, Desired: 1, LifecycleHooks: []string{hook.Hook},
					Instances: []localaws.ASGInstance{{ID: hook.Instance, LifecycleState: "Terminating:Wait", LifecycleToken: hook.Token}}})
			}
		}
	})}
	inst := instanceOf(t, ev)
	for i := range 2 {
		a := corpusAgent{id: fmt.Sprintf("%s-gpu%d", inst, i), job: fmt.Sprintf("j%d", i)}
		a.auth = e.register(a.id, inst, 1)
		if _, _, err := e.sys.Store.CreateJob(e.ctx, job.Spec{ID: a.job, TenantID: "t", WorkflowID: "render", Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		j, err := e.sys.Store.LeaseNext(e.ctx, a.auth, []string{"render"})
		if err != nil || j.ID != a.job {
			t.Fatalf("lease: %s, %v", j.ID, err)
		}
		a.token = j.LeaseToken
		e.agents = append(e.agents, a)
	}
	return e
}
