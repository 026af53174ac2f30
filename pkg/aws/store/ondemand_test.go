package store_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

const onDemandConfig = `
stage: test
fleets:
  - slug: gpu
    workflows: [wf-a]
    instance_types: [g5.xlarge]
    lease_seconds: 120
    worker_cap: 10
    retry: {max_attempts: 3}
    preemption_cap: 1
    on_demand: {fallback_after: 10m}
  - slug: spotonly
    workflows: [wf-c]
    instance_types: [g5.xlarge]
    worker_cap: 10
    preemption_cap: 1
`

func newOnDemandEnv(t *testing.T) *env {
	t.Helper()
	cfg, err := fleetconfig.Parse("ondemand.yaml", []byte(onDemandConfig))
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, cfg)
}

// registerAs registers a worker reporting a purchase option ("" for none).
func (e *env) registerAs(id, fleet, purchase string) store.WorkerAuth {
	e.t.Helper()
	a := store.WorkerAuth{WorkerID: id, Fleet: fleet, TokenHash: "hash-" + id}
	_, err := e.st.RegisterWorker(e.ctx, store.Registration{
		WorkerID: id, Fleet: fleet, Stage: "test", InstanceID: "i-" + id, MaxConcurrency: 4, TokenHash: a.TokenHash, PurchaseOption: purchase,
	})
	if err != nil {
		e.t.Fatalf("RegisterWorker(%s): %v", id, err)
	}
	return a
}

// preemptToCap leases job id to w and has it requeued for Spot
// interruptions until it is past the preemption cap.
func (e *env) preemptToCap(id string, w store.WorkerAuth) job.Outcome {
	e.t.Helper()
	var o job.Outcome
	for range 2 { // preemption_cap 1: the second preemption is past it
		j := e.lease(w)
		if j.ID != id {
			e.t.Fatalf("leased %s, want %s", j.ID, id)
		}
		var err error
		if o, err = e.st.Requeue(e.ctx, w, id, j.LeaseToken, job.SpotInterruption); err != nil {
			e.t.Fatal(err)
		}
	}
	return o
}

func TestAJobPreemptedToTheCapIsPinnedToOnDemandWithARung(t *testing.T) {
	t.Parallel()
	e := newOnDemandEnv(t)
	spot := e.registerAs("spot-1", "gpu", "spot")
	e.submit("j", "wf-a", 0)
	o := e.preemptToCap("j", spot)
	if o.Status != job.Queued || !o.OnDemandOnly || o.Reason != job.ReasonPreemptionCapOnDemand {
		t.Fatalf("requeue past the cap = %+v, want queued, on_demand_only, %s", o, job.ReasonPreemptionCapOnDemand)
	}
	j := e.wantStatus("j", job.Queued)
	if !j.OnDemandOnly || j.Reason != job.ReasonPreemptionCapOnDemand || j.Attempts != 0 || j.Preemptions != 2 {
		t.Fatalf("job after the cap: on_demand_only %v reason %q attempts %d preemptions %d", j.OnDemandOnly, j.Reason, j.Attempts, j.Preemptions)
	}

	// Neither a Spot worker nor one with no purchase option leases it.
	e.noLease(spot, store.ErrNoJob)
	e.noLease(e.registerAs("unknown-1", "gpu", ""), store.ErrNoJob)
	e.wantStatus("j", job.Queued)

	od := e.registerAs("od-1", "gpu", "on-demand")
	if got := e.lease(od); got.ID != "j" || !got.OnDemandOnly {
		t.Fatalf("On-Demand worker leased %q (on_demand_only %v), want the pinned job", got.ID, got.OnDemandOnly)
	}
	e.wantLeases("od-1", 1)
	e.wantLeases("spot-1", 0)

	// A further preemption of the pinned job (its On-Demand worker scaled
	// in) keeps it pinned and queued.
	j = e.job("j")
	if o, err := e.st.Requeue(e.ctx, od, "j", j.LeaseToken, job.ScaleIn); err != nil || o.Status != job.Queued || !o.OnDemandOnly {
		t.Fatalf("requeue of a pinned job = %+v, %v; want queued and still pinned", o, err)
	}
	e.noLease(spot, store.ErrNoJob)
}

func TestAJobPreemptedToTheCapIsDeadWithoutARung(t *testing.T) {
	t.Parallel()
	e := newOnDemandEnv(t)
	spot := e.registerAs("spot-1", "spotonly", "spot")
	e.submit("j", "wf-c", 0)
	o := e.preemptToCap("j", spot)
	if o.Status != job.Dead || o.OnDemandOnly || o.Reason != job.ReasonPreemptionCap {
		t.Fatalf("requeue past the cap = %+v, want dead for %s", o, job.ReasonPreemptionCap)
	}
	if j := e.wantStatus("j", job.Dead); j.OnDemandOnly {
		t.Fatal("a dead job is not pinned")
	}
}

func TestSpotWorkersLeaseAroundPinnedJobsAndOnDemandTakesThemFirst(t *testing.T) {
	t.Parallel()
	e := newOnDemandEnv(t)
	spot := e.registerAs("spot-1", "gpu", "spot")
	e.submit("pinned", "wf-a", 0)
	e.preemptToCap("pinned", spot)
	e.clock.Advance(1)
	e.submit("plain-1", "wf-a", 0)
	e.submit("plain-2", "wf-a", 0)

	// The pinned job is the oldest at its priority: a Spot worker skips it.
	if got := e.lease(spot); got.ID != "plain-1" {
		t.Fatalf("Spot worker leased %q, want plain-1 (the pinned job is not for Spot)", got.ID)
	}
	// An On-Demand worker takes the pinned job first at the same priority,
	// even when it is not the oldest candidate.
	od := e.registerAs("od-1", "gpu", "on-demand")
	if got := e.lease(od); got.ID != "pinned" {
		t.Fatalf("On-Demand worker leased %q, want the pinned job first", got.ID)
	}
	if got := e.lease(od); got.ID != "plain-2" {
		t.Fatalf("On-Demand worker leased %q next, want plain-2", got.ID)
	}
}

func TestTheSystemsRequeueAtTheCapPinsToo(t *testing.T) {
	t.Parallel()
	e := newOnDemandEnv(t)
	spot := e.registerAs("spot-1", "gpu", "spot")
	e.submit("j", "wf-a", 0)
	for range 2 {
		e.lease(spot)
		if n, err := e.st.RequeueWorkerLeases(e.ctx, "spot-1", job.SpotInterruption.Reason()); err != nil || n != 1 {
			t.Fatalf("RequeueWorkerLeases = %d, %v", n, err)
		}
	}
	if j := e.wantStatus("j", job.Queued); !j.OnDemandOnly || j.Reason != job.ReasonPreemptionCapOnDemand {
		t.Fatalf("after the interruption path: on_demand_only %v reason %q", j.OnDemandOnly, j.Reason)
	}
	e.noLease(spot, store.ErrNoJob)
}

// countingDB counts the GetItem requests of the real client.
type countingDB struct {
	*dynamodb.Client
	gets atomic.Int64
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.Client.GetItem(ctx, in, o...)
}

// A poll reads the worker's purchase option only when a pinned job is
// among its candidates, and once per worker per store.
func TestPinnedJobsCostOneWorkerReadPerWorker(t *testing.T) {
	t.Parallel()
	e := newOnDemandEnv(t)
	spot := e.registerAs("spot-1", "gpu", "spot")
	for _, id := range []string{"p1", "p2"} {
		e.submit(id, "wf-a", 0)
		e.preemptToCap(id, spot)
	}
	e.registerAs("od-1", "gpu", "on-demand")
	db := &countingDB{Client: localaws.DynamoDBClient(testenv.DynamoDBEndpoint(t))}
	st := store.New(db, store.Options{Table: e.st.Table(), Config: e.cfg, Clock: e.clock, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)})
	od := store.WorkerAuth{WorkerID: "od-1", Fleet: "gpu", TokenHash: "hash-od-1"}
	gets := func() int64 {
		before := db.gets.Load()
		if _, err := st.LeaseNext(e.ctx, od, []string{"wf-a"}); err != nil {
			t.Fatal(err)
		}
		return db.gets.Load() - before
	}
	first, second := gets(), gets()
	if first != second+1 {
		t.Fatalf("GetItem per lease: first %d, second %d; want the worker read once, on the first", first, second)
	}
	e.submit("plain", "wf-a", 0)
	plain := store.WorkerAuth{WorkerID: "spot-1", Fleet: "gpu", TokenHash: "hash-spot-1"}
	before := db.gets.Load()
	if _, err := st.LeaseNext(e.ctx, plain, []string{"wf-a"}); err != nil {
		t.Fatal(err)
	}
	if n := db.gets.Load() - before; n != second {
		t.Fatalf("GetItem for a lease with no pinned candidate: %d, want %d (no worker read)", n, second)
	}
}

// Leases a poll brings back itself are planned like any other candidates:
// an On-Demand worker takes the pinned job first, though the plain one
// came back with it and is older.
func TestReclaimedPinnedJobsGoFirstToOnDemand(t *testing.T) {
	t.Parallel()
	e := newOnDemandEnv(t)
	spot := e.registerAs("spot-1", "gpu", "spot")
	e.submit("plain", "wf-a", 0)
	if got := e.lease(spot); got.ID != "plain" {
		t.Fatalf("Spot worker leased %q, want plain", got.ID)
	}
	e.clock.Advance(time.Second) // plain is older, and its lease runs out first
	e.submit("pinned", "wf-a", 0)
	e.preemptToCap("pinned", spot)
	if got := e.lease(e.registerAs("od-1", "gpu", "on-demand")); got.ID != "pinned" {
		t.Fatalf("On-Demand worker leased %q, want pinned", got.ID)
	}
	// Neither lease heartbeats: both run out, and the next poll brings both back.
	e.clock.Advance(time.Hour)
	if got := e.lease(e.registerAs("od-2", "gpu", "on-demand")); got.ID != "pinned" {
		t.Fatalf("On-Demand worker leased %q of the reclaimed jobs, want the pinned one first", got.ID)
	}
	if got := e.lease(e.registerAs("spot-2", "gpu", "spot")); got.ID != "plain" {
		t.Fatalf("Spot worker leased %q, want plain", got.ID)
	}
}
