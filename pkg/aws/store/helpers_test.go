package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const testConfig = `
stage: test
fleets:
  - slug: gpu
    workflows: [wf-a, wf-b]
    instance_types: [g5.xlarge]
    lease_seconds: 120
    heartbeat_seconds: 30
    worker_cap: 10
    retry:
      max_attempts: 3
      backoff: [2m, 10m, 30m]
    preemption_cap: 2
    ready_shards: 4
  - slug: other
    workflows: [wf-c]
    instance_types: [g5.xlarge]
    require_approval: true
`

type env struct {
	t     *testing.T
	ctx   context.Context
	clock *clock.Fake
	cfg   *fleetconfig.Config
	st    *store.Store
}

func newEnv(t *testing.T, opts ...func(*store.Options)) *env {
	t.Helper()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, cfg, opts...)
}

func newEnvWith(t *testing.T, cfg *fleetconfig.Config, opts ...func(*store.Options)) *env {
	t.Helper()
	client, table := testenv.DynamoDB(t)
	clk := clock.NewFake(t0)
	o := store.Options{Table: table, Config: cfg, Clock: clk, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	return &env{t: t, ctx: context.Background(), clock: clk, cfg: cfg, st: store.New(client, o)}
}

func (e *env) submit(id, workflow string, priority int) job.Job {
	e.t.Helper()
	j, created, err := e.st.CreateJob(e.ctx, job.Spec{ID: id, TenantID: "t1", WorkflowID: workflow, Priority: priority, Input: json.RawMessage(`{"n":1}`)})
	if err != nil || !created {
		e.t.Fatalf("CreateJob(%s) = created %v, %v", id, created, err)
	}
	return j
}

func (e *env) register(id, fleet string, maxConcurrency int) store.WorkerAuth {
	e.t.Helper()
	a := store.WorkerAuth{WorkerID: id, Fleet: fleet, TokenHash: "hash-" + id}
	_, err := e.st.RegisterWorker(e.ctx, store.Registration{
		WorkerID: id, Fleet: fleet, Stage: "test", InstanceID: "i-" + id, MaxConcurrency: maxConcurrency, TokenHash: a.TokenHash,
	})
	if err != nil {
		e.t.Fatalf("RegisterWorker(%s): %v", id, err)
	}
	return a
}

func (e *env) workflows(fleet string) []string {
	f, _ := e.cfg.Fleet(fleet)
	return f.Workflows
}

func (e *env) lease(a store.WorkerAuth) job.Job {
	e.t.Helper()
	j, err := e.st.LeaseNext(e.ctx, a, e.workflows(a.Fleet))
	if err != nil {
		e.t.Fatalf("LeaseNext(%s): %v", a.WorkerID, err)
	}
	return j
}

func (e *env) noLease(a store.WorkerAuth, want error) {
	e.t.Helper()
	j, err := e.st.LeaseNext(e.ctx, a, e.workflows(a.Fleet))
	if !errors.Is(err, want) {
		e.t.Fatalf("LeaseNext(%s) = job %q, %v; want %v", a.WorkerID, j.ID, err, want)
	}
}

func (e *env) job(id string) job.Job {
	e.t.Helper()
	j, err := e.st.GetJob(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetJob(%s): %v", id, err)
	}
	return j
}

func (e *env) worker(id string) worker.Worker {
	e.t.Helper()
	w, err := e.st.GetWorker(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetWorker(%s): %v", id, err)
	}
	return w
}

func (e *env) wantStatus(id string, want job.Status) job.Job {
	e.t.Helper()
	j := e.job(id)
	if j.Status != want {
		e.t.Fatalf("job %s is %s (%s), want %s", id, j.Status, j.Reason, want)
	}
	return j
}

func (e *env) wantLeases(worker string, want int) {
	e.t.Helper()
	if got := e.worker(worker).Leases; got != want {
		e.t.Fatalf("worker %s holds %d leases, want %d", worker, got, want)
	}
}

// same reports whether two reads of a job are the same state (history included).
func same(a, b job.Job) error {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		return fmt.Errorf("job changed:\nbefore %s\nafter  %s", ja, jb)
	}
	return nil
}

// record writes a decision as a tick does: made from the state it read.
func (e *env) record(fleet string, r fleetstate.Record) error {
	prev, err := e.st.GetFleetState(e.ctx, fleet)
	if err != nil {
		return err
	}
	return e.st.RecordDecision(e.ctx, fleet, r, prev)
}

// workers lists a fleet's workers.
func (e *env) workers(fleet string) []worker.Worker {
	e.t.Helper()
	ws, err := e.st.ListWorkers(e.ctx, fleet)
	if err != nil {
		e.t.Fatal(err)
	}
	return ws
}
