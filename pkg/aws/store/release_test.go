package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// Items written by release N-1 are read by release N (docs/deploy.md,
// "Compatibility"). testdata/release-<version>/ keeps what a release's store
// wrote: items.json (every item of the table, in DynamoDB JSON), config.yaml
// (the stage config it ran with) and manifest.json (what that store answered
// about those items when it wrote them). TestReleaseItemsReadByTodaysStore
// loads each release's items into a fresh table through the real SDK and
// checks that today's store answers the same and can lease, heartbeat,
// complete, fail, retry, relay and sweep them.
//
// At release time, before tagging vX.Y.Z, write that release's fixtures
// with today's store and commit them (make release-fixtures VERSION=vX.Y.Z):
//
//	FLEETQ_RELEASE_FIXTURES=vX.Y.Z go test ./pkg/aws/store -run TestWriteReleaseFixtures -count=1
//
// A release directory is never rewritten: if this test fails, today's store
// lost the old data. A release that must change how items are laid out
// ships a migration (docs/data-model.md, "Changing the schema"), and this
// test runs it between loading the items and reading them.

// envReleaseFixtures names the version whose fixtures TestWriteReleaseFixtures writes.
const envReleaseFixtures = "FLEETQ_RELEASE_FIXTURES"

// releaseConfig is the stage config the fixtures are written with: two
// fleets (one needing approval), a tenant with both caps, prices for costs.
const releaseConfig = `stage: test
fleets:
  - slug: gpu
    workflows: [wf-a, wf-b]
    instance_types: [g5.xlarge]
    lease_seconds: 120
    heartbeat_seconds: 30
    worker_cap: 10
    retry:
      max_attempts: 3
      backoff: [30m]
    preemption_cap: 2
  - slug: other
    workflows: [wf-c]
    instance_types: [g5.xlarge]
    require_approval: true
tenants:
  - id: t1
  - id: capped
    max_queued: 10
    max_leased: 5
prices:
  overhead: 0.2
  instance_types:
    g5.xlarge: {on_demand: 1.0, spot: 0.5}
`

// The scenario's names: the writer creates them, the check acts on them.
const (
	relWorkerSpot    = "w-spot"    // gpu, Spot, holds three leases
	relWorkerDrain   = "w-drain"   // gpu, On-Demand, draining, its instance terminating
	relWorkerWaiting = "w-waiting" // other, waiting for approval

	relJobDone        = "t1:done"         // succeeded, relayed: cost totals and a pending callback
	relJobRetry       = "t1:retry"        // failed once, waiting out its backoff
	relJobDead        = "t1:dead"         // failed for good
	relJobCapped      = "capped:c1"       // leased on a tenant slot (token s.…)
	relJobLeased      = "t1:leased"       // leased, heartbeated
	relJobPreempted   = "t1:preempted"    // requeued by a Spot interruption
	relJobCancelAsked = "t1:cancel-asked" // leased, then canceled by an operator
	relJobCanceled    = "t1:canceled"     // canceled while queued
	relJobQueuedHi    = "t1:queued-hi"    // queued, priority 5: the next lease
	relJobQueuedLo    = "t1:queued-lo"    // queued, priority 0
	relJobOther       = "t1:other"        // queued in the fleet that needs approval

	relReservation = "capped:pending" // a tenant slot taken, its job not yet filed (v0.1.0 wrote a reservation item, later releases an accepted job)
	relLoginNonce  = "nonce-1"
	relSession     = "session-1"
	relOperator    = "operator@example.com"
	relAPIKey      = "key-1"
	relCallbackURL = "https://hooks.example.com/fleetq"
)

// releaseAt is when the fixtures' store ran (its fake clock).
var releaseAt = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

var releaseDirName = regexp.MustCompile(`^release-v\d+\.\d+\.\d+$`)

// releaseManifest is what the release's store answered about its items,
// in a form of its own so that it does not follow the store's Go types.
type releaseManifest struct {
	Version   string    `json:"version"`
	WrittenAt time.Time `json:"written_at"`
	// Jobs and Workers are views (relJobView, relWorkerView) by id;
	// WorkerLists the ListWorkers answers by fleet (read from the index).
	Jobs        map[string]map[string]any   `json:"jobs"`
	Workers     map[string]map[string]any   `json:"workers"`
	WorkerLists map[string][]map[string]any `json:"worker_lists"`
	// TokenHashes are the workers' token digests, to act as them.
	TokenHashes map[string]string `json:"token_hashes"`
	// Lists are ListJobs answers by "<fleet>/<status>", ids in order.
	Lists        map[string][]string           `json:"lists"`
	Backlogs     map[string]fleetstate.Backlog `json:"backlogs"`
	Fleets       map[string]map[string]any     `json:"fleets"`
	TenantOpen   map[string]int                `json:"tenant_open"`
	TenantLeased map[string]int                `json:"tenant_leased"`
	ByInstance   map[string][]string           `json:"by_instance"`
	Others       map[string]json.RawMessage    `json:"others"`
}

func relJobView(j job.Job) map[string]any {
	v := map[string]any{
		"id": j.ID, "tenant": j.TenantID, "workflow": j.WorkflowID, "fleet": j.FleetSlug, "status": string(j.Status),
		"priority": j.Priority, "attempts": j.Attempts, "max_attempts": j.MaxAttempts,
		"preemptions": j.Preemptions, "max_preemptions": j.MaxPreemptions, "on_demand_only": j.OnDemandOnly,
		"timeout_s": j.TimeoutSeconds, "queue_timeout_s": j.QueueTimeoutSeconds,
		"input": j.Input, "result": j.Result, "error": j.Error,
		"created_at": j.CreatedAt, "updated_at": j.UpdatedAt, "not_before": j.NotBefore,
		"first_leased_at": j.FirstLeasedAt, "leased_at": j.LeasedAt,
		"lease_token": j.LeaseToken, "lease_expires_at": j.LeaseExpiresAt, "worker_id": j.WorkerID,
		"progress": j.Progress, "reason": j.Reason, "cancel_requested": j.CancelRequested,
		"cost_usd": j.CostUSD, "history": j.History, "callback_url": j.CallbackURL, "callback": j.Callback,
	}
	return normalize(v)
}

func relWorkerView(w worker.Worker) map[string]any {
	return normalize(map[string]any{
		"id": w.ID, "fleet": w.Fleet, "stage": w.Stage, "instance_id": w.InstanceID, "instance_type": w.InstanceType,
		"az": w.AZ, "purchase": w.PurchaseOption, "capabilities": w.Capabilities, "providers": w.Providers,
		"max_concurrency": w.MaxConcurrency, "token_hash": w.TokenHash, "status": string(w.Status),
		"approved": w.Approved, "leases": w.Leases, "registered_at": w.RegisteredAt, "last_seen_at": w.LastSeenAt,
		"last_release_at": w.LastReleaseAt, "last_claim_at": w.LastClaimAt, "first_claim_at": w.FirstClaimAt,
		"source_ip": w.SourceIP, "agent_version": w.AgentVersion,
		// The boot times v0.1.0 knew (a warm-up's end came later).
		"boot": map[string]any{"LaunchedAt": w.Boot.LaunchedAt, "AgentStartedAt": w.Boot.AgentStartedAt, "RunnerReadyAt": w.Boot.RunnerReadyAt},
	})
}

func relFleetView(s fleetstate.State) map[string]any {
	return normalize(map[string]any{
		"workers": s.Workers, "desired": s.Desired, "in_service": s.InService, "last_active_at": s.LastActiveAt,
		"last_decision": s.LastDecision, "history": s.History, "first_seen": s.FirstSeen, "woken_at": s.WokenAt, "seq": s.Seq,
	})
}

// normalize turns a view into what JSON makes of it, so a view read back
// from a manifest and one built now compare equal.
func normalize(v any) map[string]any {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}

func rawJSON(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

type releaseEnv struct {
	t      *testing.T
	ctx    context.Context
	client *dynamodb.Client
	table  string
	clock  *clock.Fake
	cfg    *fleetconfig.Config
	st     *store.Store
}

func newReleaseEnv(t *testing.T, configYAML []byte, at time.Time) *releaseEnv {
	t.Helper()
	cfg, err := fleetconfig.Parse("config.yaml", configYAML)
	if err != nil {
		t.Fatalf("the release's config no longer parses: %v", err)
	}
	client, table := testenv.DynamoDB(t)
	clk := clock.NewFake(at)
	st := store.New(client, store.Options{Table: table, Config: cfg, Clock: clk, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)})
	return &releaseEnv{t: t, ctx: context.Background(), client: client, table: table, clock: clk, cfg: cfg, st: st}
}

func (e *releaseEnv) must(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

func (e *releaseEnv) auth(id, fleet string) store.WorkerAuth {
	return store.WorkerAuth{WorkerID: id, Fleet: fleet, TokenHash: "hash-" + id}
}

func (e *releaseEnv) step() { e.clock.Advance(time.Second) }

func (e *releaseEnv) create(id, workflow string, priority int, callbackURL string) {
	e.t.Helper()
	tenant, _, _ := strings.Cut(id, ":")
	_, created, err := e.st.CreateJob(e.ctx, job.Spec{ID: id, TenantID: tenant, WorkflowID: workflow, Priority: priority,
		Input: json.RawMessage(`{"prompt":"a lighthouse at dusk","steps":20}`), CallbackURL: callbackURL})
	if err != nil || !created {
		e.t.Fatalf("CreateJob(%s) = %v, %v", id, created, err)
	}
	e.step()
}

// accept accepts the capped tenant's job id as the API does before
// queuing it: an accepted record holding a tenant slot.
func (e *releaseEnv) accept(id string) {
	e.t.Helper()
	tenant, _, _ := strings.Cut(id, ":")
	_, ok, err := e.st.AcceptJob(e.ctx, job.Spec{ID: id, TenantID: tenant, WorkflowID: "wf-a"}, false)
	if err != nil || !ok {
		e.t.Fatalf("AcceptJob(%s) = %v, %v", id, ok, err)
	}
}

// leaseOnly leases the next job and insists it is want.
func (e *releaseEnv) leaseOnly(a store.WorkerAuth, want string, workflows ...string) job.Job {
	e.t.Helper()
	j, err := e.st.LeaseNext(e.ctx, a, workflows)
	if err != nil || j.ID != want {
		e.t.Fatalf("LeaseNext(%s) = %q, %v; want %s", a.WorkerID, j.ID, err, want)
	}
	e.step()
	return j
}

// writeScenario makes the store write one item of every kind it has.
func (e *releaseEnv) writeScenario(version string) {
	ctx := e.ctx
	gpu := []string{"wf-a", "wf-b"}
	reg := func(r store.Registration) {
		e.t.Helper()
		_, err := e.st.RegisterWorker(ctx, r)
		e.must(err, "RegisterWorker "+r.WorkerID)
		e.step()
	}
	boot := worker.Boot{LaunchedAt: releaseAt.Add(-3 * time.Minute), AgentStartedAt: releaseAt.Add(-time.Minute), RunnerReadyAt: releaseAt.Add(-30 * time.Second)}
	reg(store.Registration{WorkerID: relWorkerSpot, Fleet: "gpu", Stage: "test", InstanceID: "i-0spot", InstanceType: "g5.xlarge",
		AZ: "us-east-1a", PurchaseOption: "spot", Capabilities: json.RawMessage(`{"gpus":1,"gpu_model":"A10G"}`),
		Providers: []string{"self_hosted"}, MaxConcurrency: 4, TokenHash: "hash-" + relWorkerSpot, SourceIP: "10.0.0.5",
		AgentKeyHash: "agentkey-" + relWorkerSpot, AgentVersion: version, Boot: boot})
	reg(store.Registration{WorkerID: relWorkerDrain, Fleet: "gpu", Stage: "test", InstanceID: "i-0drain", InstanceType: "g5.xlarge",
		AZ: "us-east-1b", PurchaseOption: "on-demand", MaxConcurrency: 1, TokenHash: "hash-" + relWorkerDrain, SourceIP: "10.0.0.6",
		AgentKeyHash: "agentkey-" + relWorkerDrain, AgentVersion: "v0.0.9"})
	reg(store.Registration{WorkerID: relWorkerWaiting, Fleet: "other", Stage: "test", InstanceID: "i-0wait", MaxConcurrency: 1,
		TokenHash: "hash-" + relWorkerWaiting, AgentKeyHash: "agentkey-" + relWorkerWaiting})
	spot := e.auth(relWorkerSpot, "gpu")

	// Succeeded after a heartbeat, with a callback.
	e.create(relJobDone, "wf-a", 0, relCallbackURL)
	j := e.leaseOnly(spot, relJobDone, gpu...)
	half := 0.5
	_, err := e.st.Heartbeat(ctx, spot, j.ID, j.LeaseToken, &half)
	e.must(err, "Heartbeat done")
	e.clock.Advance(5 * time.Minute)
	e.must(e.st.Complete(ctx, spot, j.ID, j.LeaseToken, json.RawMessage(`{"image_url":"s3://out/done.png"}`)), "Complete done")
	e.step()

	// A retryable failure: queued behind its backoff.
	e.create(relJobRetry, "wf-b", 0, "")
	j = e.leaseOnly(spot, relJobRetry, gpu...)
	_, err = e.st.Fail(ctx, spot, j.ID, j.LeaseToken, job.Error{Code: "cuda_oom", Message: "CUDA out of memory", Retryable: true})
	e.must(err, "Fail retry")
	e.step()

	// A failure for good.
	e.create(relJobDead, "wf-a", 0, "")
	j = e.leaseOnly(spot, relJobDead, gpu...)
	_, err = e.st.Fail(ctx, spot, j.ID, j.LeaseToken, job.Error{Code: "bad_input", Message: "the workflow rejected its input", Retryable: false})
	e.must(err, "Fail dead")
	e.step()

	// A capped tenant's job: accepted, filed, leased on a slot.
	e.accept(relJobCapped)
	e.create(relJobCapped, "wf-a", 0, "")
	j = e.leaseOnly(spot, relJobCapped, gpu...)
	if !strings.HasPrefix(j.LeaseToken, "s.") {
		e.t.Fatalf("the capped tenant's lease token %q holds no slot", j.LeaseToken)
	}

	// Leased and heartbeated.
	e.create(relJobLeased, "wf-a", 0, "")
	j = e.leaseOnly(spot, relJobLeased, gpu...)
	quarter := 0.25
	_, err = e.st.Heartbeat(ctx, spot, j.ID, j.LeaseToken, &quarter)
	e.must(err, "Heartbeat leased")
	e.step()

	// Preempted: back in the queue without spending an attempt.
	e.create(relJobPreempted, "wf-a", 0, "")
	j = e.leaseOnly(spot, relJobPreempted, gpu...)
	_, err = e.st.Requeue(ctx, spot, j.ID, j.LeaseToken, job.SpotInterruption)
	e.must(err, "Requeue preempted")
	e.step()

	// Leased, then canceled by an operator (the worker learns at its next heartbeat).
	e.create(relJobCancelAsked, "wf-a", 9, "")
	e.leaseOnly(spot, relJobCancelAsked, gpu...)
	_, err = e.st.Cancel(ctx, relJobCancelAsked)
	e.must(err, "Cancel leased")
	e.step()

	// Canceled while queued, with a callback that stays in the outbox.
	e.create(relJobCanceled, "wf-b", 0, relCallbackURL)
	_, err = e.st.Cancel(ctx, relJobCanceled)
	e.must(err, "Cancel queued")
	e.step()

	e.create(relJobQueuedHi, "wf-a", 5, "")
	e.create(relJobQueuedLo, "wf-b", 0, "")
	e.create(relJobOther, "wf-c", 0, "")
	e.accept(relReservation)

	// The succeeded job's outcome relayed: its cost totalled, its callback
	// filed; the other outcomes stay in the outbox.
	_, err = e.st.RelayJob(ctx, &recorder{}, relJobDone)
	e.must(err, "RelayJob done")

	// Fleet state: a wake, a scaling decision, interruptions, Spot prices.
	woke, err := e.st.WakeFleet(ctx, "other", 1, 1, scaling.WakeReason(1))
	if err != nil || !woke {
		e.t.Fatalf("WakeFleet = %v, %v", woke, err)
	}
	prev, err := e.st.GetFleetState(ctx, "gpu")
	e.must(err, "GetFleetState gpu")
	e.must(e.st.RecordDecision(ctx, "gpu", fleetstate.Record{
		Decision:     fleetstate.Decision{At: e.clock.Now(), Desired: 2, Reason: scaling.RecordedReason("", "4 leased + 3 ready on 2 instances"), Inputs: fleetstate.InputsFrom(map[string]int{"ready": 3, "leased": 4}), InService: 2},
		LastActiveAt: e.clock.Now(),
		FirstSeen:    map[string]time.Time{"i-0spot": releaseAt.Add(-3 * time.Minute), "i-0drain": releaseAt.Add(-2 * time.Minute)},
	}, prev), "RecordDecision")
	_, err = e.st.RecordInterruption(ctx, fleetstate.Interruption{EventID: "evt-spot-1", Fleet: "gpu", Kind: fleetstate.InterruptSpot,
		InstanceType: "g5.xlarge", AZ: "us-east-1a", At: e.clock.Now()})
	e.must(err, "RecordInterruption")
	e.must(e.st.PutSpotPrices(ctx, "gpu", cost.SpotPrices{ReadAt: e.clock.Now(), USD: map[string]float64{cost.SpotKey("g5.xlarge", "us-east-1a"): 0.42}}), "PutSpotPrices")

	// Registration window, a rejected submission, a terminating instance, a drain.
	_, err = e.st.TakeRegistrationSlot(ctx, "10.0.0.5", 10)
	e.must(err, "TakeRegistrationSlot")
	e.must(e.st.RecordRejection(ctx, store.Rejection{MessageID: "msg-1", Source: "sqs", Reason: "workflow \"wf-x\" is served by no fleet",
		Body: `{"tenant_id":"t1","workflow_id":"wf-x"}`, At: e.clock.Now()}), "RecordRejection")
	_, _, err = e.st.StartTermination(ctx, store.Termination{InstanceID: "i-0drain", Fleet: "gpu", Group: "fleetq-test-gpu",
		Hook: "fleetq-drain", Token: "lifecycle-token-1", StartedAt: e.clock.Now(), Deadline: e.clock.Now().Add(15 * time.Minute), HeartbeatAt: e.clock.Now()})
	e.must(err, "StartTermination")
	_, err = e.st.DrainWorker(ctx, relWorkerDrain)
	e.must(err, "DrainWorker")

	// Console sessions and an API key.
	e.must(e.st.UseConsoleLogin(ctx, relLoginNonce, e.clock.Now().Add(2*time.Minute)), "UseConsoleLogin")
	e.must(e.st.EndConsoleSession(ctx, relSession, e.clock.Now().Add(12*time.Hour)), "EndConsoleSession")
	_, err = e.st.EndConsoleSessions(ctx, relOperator)
	e.must(err, "EndConsoleSessions")
	e.must(e.st.CreateAPIKey(ctx, store.APIKey{ID: relAPIKey, Tenant: "t1", Name: "ci", Hash: "sha256-of-the-secret",
		CreatedMS: e.clock.Now().UnixMilli()}), "CreateAPIKey")
	e.step()
}

// manifest records what the store answers about the table now.
func (e *releaseEnv) manifest(version string) releaseManifest {
	ctx := e.ctx
	m := releaseManifest{Version: version, WrittenAt: e.clock.Now(), Jobs: map[string]map[string]any{},
		Workers: map[string]map[string]any{}, WorkerLists: map[string][]map[string]any{}, TokenHashes: map[string]string{}, Lists: map[string][]string{},
		Backlogs: map[string]fleetstate.Backlog{}, Fleets: map[string]map[string]any{}, TenantOpen: map[string]int{},
		TenantLeased: map[string]int{}, Others: map[string]json.RawMessage{}, ByInstance: map[string][]string{}}
	for _, id := range []string{relJobDone, relJobRetry, relJobDead, relJobCapped, relJobLeased, relJobPreempted,
		relJobCancelAsked, relJobCanceled, relJobQueuedHi, relJobQueuedLo, relJobOther} {
		j, err := e.st.GetJob(ctx, id)
		e.must(err, "GetJob "+id)
		m.Jobs[id] = relJobView(j)
	}
	for _, fleet := range []string{"gpu", "other"} {
		for _, s := range []job.Status{job.Queued, job.Leased, job.Succeeded, job.Dead, job.Canceled} {
			m.Lists[fleet+"/"+string(s)] = e.list(fleet, s)
		}
		b, err := e.st.CountBacklog(ctx, fleet)
		e.must(err, "CountBacklog")
		m.Backlogs[fleet] = b
		st, err := e.st.GetFleetState(ctx, fleet)
		e.must(err, "GetFleetState")
		m.Fleets[fleet] = relFleetView(st)
		m.WorkerLists[fleet] = e.workerList(fleet)
		for _, lw := range m.WorkerLists[fleet] {
			id, _ := lw["id"].(string)
			w, err := e.st.GetWorker(ctx, id)
			e.must(err, "GetWorker")
			m.Workers[w.ID] = relWorkerView(w)
			m.TokenHashes[w.ID] = w.TokenHash
		}
	}
	for _, inst := range []string{"i-0spot", "i-0drain"} {
		m.ByInstance[inst] = e.byInstance(inst)
	}
	for _, tenant := range []string{"t1", "capped"} {
		n, err := e.st.TenantOpenJobs(ctx, tenant)
		e.must(err, "TenantOpenJobs")
		m.TenantOpen[tenant] = n
		n, err = e.st.TenantLeasedJobs(ctx, tenant)
		e.must(err, "TenantLeasedJobs")
		m.TenantLeased[tenant] = n
	}
	for name, v := range e.others() {
		m.Others[name] = v
	}
	return m
}

func (e *releaseEnv) list(fleet string, s job.Status) []string {
	e.t.Helper()
	sums, err := e.st.ListJobs(e.ctx, fleet, s, 100)
	e.must(err, "ListJobs")
	ids := []string{}
	for _, j := range sums {
		ids = append(ids, j.ID)
	}
	return ids
}

func (e *releaseEnv) workerList(fleet string) []map[string]any {
	e.t.Helper()
	ws, err := e.st.ListWorkers(e.ctx, fleet)
	e.must(err, "ListWorkers")
	out := []map[string]any{}
	for _, w := range ws {
		out = append(out, relWorkerView(w))
	}
	return out
}

func (e *releaseEnv) byInstance(inst string) []string {
	e.t.Helper()
	ws, err := e.st.WorkersByInstance(e.ctx, inst)
	e.must(err, "WorkersByInstance")
	ids := []string{}
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	sort.Strings(ids)
	return ids
}

// others are the answers about the items that are not jobs or workers.
func (e *releaseEnv) others() map[string]json.RawMessage {
	ctx := e.ctx
	out := map[string]json.RawMessage{}
	key, err := e.st.GetAPIKey(ctx, relAPIKey)
	e.must(err, "GetAPIKey")
	out["api_key"] = rawJSON(key)
	keys, err := e.st.ListAPIKeys(ctx, "t1")
	e.must(err, "ListAPIKeys")
	out["api_keys_t1"] = rawJSON(keys)
	prices, err := e.st.SpotPrices(ctx, "gpu")
	e.must(err, "SpotPrices")
	out["spot_prices"] = rawJSON(prices)
	counts, err := e.st.InterruptionCounts(ctx, "gpu", releaseAt.Add(-time.Hour))
	e.must(err, "InterruptionCounts")
	out["interruptions"] = rawJSON(counts)
	rejections, err := e.st.ListRejections(ctx, 10)
	e.must(err, "ListRejections")
	out["rejections"] = rawJSON(rejections)
	terms, err := e.st.Terminations(ctx)
	e.must(err, "Terminations")
	out["terminations"] = rawJSON(terms)
	costs, err := e.st.CostsSince(ctx, releaseAt.Add(-time.Hour))
	e.must(err, "CostsSince")
	out["costs"] = rawJSON(costs)
	epoch, err := e.st.ConsoleEpoch(ctx, relOperator)
	e.must(err, "ConsoleEpoch")
	out["console_epoch"] = rawJSON(epoch)
	ended, err := e.st.ConsoleSessionEnded(ctx, relSession)
	e.must(err, "ConsoleSessionEnded")
	out["console_session_ended"] = rawJSON(ended)
	due, err := e.st.DueCallbacks(ctx, 10)
	e.must(err, "DueCallbacks")
	hooks := []map[string]any{}
	for _, c := range due {
		hooks = append(hooks, map[string]any{"job_id": c.JobID, "url": c.URL, "event_id": c.Event.ID, "detail_type": c.Event.DetailType, "attempts": c.Attempts})
	}
	out["due_callbacks"] = rawJSON(hooks)
	return out
}

// scan reads every item of the table, ordered by key.
func (e *releaseEnv) scan() []map[string]types.AttributeValue {
	e.t.Helper()
	var items []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(e.client, &dynamodb.ScanInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(e.ctx)
		e.must(err, "Scan")
		items = append(items, page.Items...)
	}
	str := func(it map[string]types.AttributeValue, k string) string {
		if s, ok := it[k].(*types.AttributeValueMemberS); ok {
			return s.Value
		}
		return ""
	}
	sort.Slice(items, func(a, b int) bool {
		if pa, pb := str(items[a], store.AttrPK), str(items[b], store.AttrPK); pa != pb {
			return pa < pb
		}
		return str(items[a], store.AttrSK) < str(items[b], store.AttrSK)
	})
	return items
}

// TestWriteReleaseFixtures writes testdata/release-<version>/ with today's
// store when FLEETQ_RELEASE_FIXTURES names the version (see the top of this
// file); otherwise it only checks that the scenario still runs.
func TestWriteReleaseFixtures(t *testing.T) {
	t.Parallel()
	version := os.Getenv(envReleaseFixtures)
	if version != "" && !releaseDirName.MatchString("release-"+version) {
		t.Fatalf("%s=%q: a release version is vMAJOR.MINOR.PATCH", envReleaseFixtures, version)
	}
	e := newReleaseEnv(t, []byte(releaseConfig), releaseAt)
	e.writeScenario(orDev(version))
	m := e.manifest(orDev(version))
	items := e.scan()
	if version == "" {
		if len(items) < 20 {
			t.Fatalf("the scenario wrote %d items", len(items))
		}
		return
	}
	dir := filepath.Join("testdata", "release-"+version)
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s exists: a release's fixtures are never rewritten", dir)
	}
	e.must(os.MkdirAll(dir, 0o755), "mkdir")
	var rows []string
	for _, it := range items {
		j, err := itemToJSON(it)
		e.must(err, "item to JSON")
		rows = append(rows, "  "+string(rawJSON(j)))
	}
	e.must(os.WriteFile(filepath.Join(dir, "items.json"), []byte("[\n"+strings.Join(rows, ",\n")+"\n]\n"), 0o644), "write items")
	e.must(os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(releaseConfig), 0o644), "write config")
	raw, err := json.MarshalIndent(m, "", "  ")
	e.must(err, "manifest")
	e.must(os.WriteFile(filepath.Join(dir, "manifest.json"), append(raw, '\n'), 0o644), "write manifest")
	t.Logf("wrote %d items to %s", len(items), dir)
}

func orDev(v string) string {
	if v == "" {
		return "dev"
	}
	return v
}

// releaseDirs lists testdata/release-*, oldest first.
func releaseDirs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, en := range entries {
		if en.IsDir() && releaseDirName.MatchString(en.Name()) {
			dirs = append(dirs, en.Name())
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no testdata/release-v*: the last release's items are missing")
	}
	sort.Strings(dirs)
	return dirs
}

// loadRelease puts a release's items into a fresh table through the SDK.
func loadRelease(t *testing.T, dir string) (*releaseEnv, releaseManifest) {
	t.Helper()
	read := func(name string) []byte {
		raw, err := os.ReadFile(filepath.Join("testdata", dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	var m releaseManifest
	if err := json.Unmarshal(read("manifest.json"), &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	e := newReleaseEnv(t, read("config.yaml"), m.WrittenAt)
	var rows []json.RawMessage
	if err := json.Unmarshal(read("items.json"), &rows); err != nil {
		t.Fatalf("items: %v", err)
	}
	for i, row := range rows {
		item, err := itemFromJSON(row)
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		_, err = e.client.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item})
		e.must(err, fmt.Sprintf("PutItem %d", i))
	}
	return e, m
}

// sameView compares what the release's store answered (want) with what
// today's answers: every value the release gave, in nested objects and
// lists too, must be the same today; what today adds (a field the release
// did not know) is not compared.
func sameView(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	if diffs := viewDiffs("", got, want); len(diffs) > 0 {
		t.Errorf("%s reads differently:\n  %s", what, strings.Join(diffs, "\n  "))
	}
}

func viewDiffs(path string, got, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		if g, ok := got.(map[string]any); ok {
			var out []string
			for k, wv := range w {
				out = append(out, viewDiffs(strings.TrimPrefix(path+"."+k, "."), g[k], wv)...)
			}
			sort.Strings(out)
			return out
		}
	case []any:
		if g, ok := got.([]any); ok && len(g) == len(w) {
			var out []string
			for i := range w {
				out = append(out, viewDiffs(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
			}
			return out
		}
	}
	if !reflect.DeepEqual(got, want) {
		return []string{fmt.Sprintf("%s: today %s, release %s", path, rawJSON(got), rawJSON(want))}
	}
	return nil
}

func sameJSON(t *testing.T, what string, got any, want json.RawMessage) {
	t.Helper()
	var g, w any
	_ = json.Unmarshal(rawJSON(got), &g)
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if diffs := viewDiffs(what, g, w); len(diffs) > 0 {
		t.Errorf("%s reads differently:\n  %s", what, strings.Join(diffs, "\n  "))
	}
}

func TestReleaseItemsReadByTodaysStore(t *testing.T) {
	t.Parallel()
	for _, dir := range releaseDirs(t) {
		t.Run(dir, func(t *testing.T) {
			e, m := loadRelease(t, dir)
			e.checkReads(m)
			if t.Failed() {
				return
			}
			e.checkActions(m)
		})
	}
}

// checkReads: today's store answers what the release's store answered.
func (e *releaseEnv) checkReads(m releaseManifest) {
	t, ctx := e.t, e.ctx
	for id, want := range m.Jobs {
		j, err := e.st.GetJob(ctx, id)
		if err != nil {
			t.Errorf("GetJob(%s): %v", id, err)
			continue
		}
		sameView(t, "job "+id, relJobView(j), want)
	}
	for id, want := range m.Workers {
		w, err := e.st.GetWorker(ctx, id)
		if err != nil {
			t.Errorf("GetWorker(%s): %v", id, err)
			continue
		}
		sameView(t, "worker "+id, relWorkerView(w), want)
	}
	for fleet, want := range m.WorkerLists {
		got := e.workerList(fleet)
		if len(got) != len(want) {
			t.Errorf("ListWorkers(%s) lists %d workers, the release %d", fleet, len(got), len(want))
			continue
		}
		for i := range want {
			sameView(t, fmt.Sprintf("ListWorkers(%s)[%d]", fleet, i), got[i], want[i])
		}
	}
	for key, want := range m.Lists {
		fleet, status, _ := strings.Cut(key, "/")
		if got := e.list(fleet, job.Status(status)); !reflect.DeepEqual(got, want) {
			t.Errorf("ListJobs(%s, %s) = %v, release listed %v", fleet, status, got, want)
		}
	}
	for fleet, want := range m.Backlogs {
		b, err := e.st.CountBacklog(ctx, fleet)
		if err != nil || b != want {
			t.Errorf("CountBacklog(%s) = %+v, %v; release counted %+v", fleet, b, err, want)
		}
	}
	for fleet, want := range m.Fleets {
		st, err := e.st.GetFleetState(ctx, fleet)
		if err != nil {
			t.Errorf("GetFleetState(%s): %v", fleet, err)
			continue
		}
		sameView(t, "fleet "+fleet, relFleetView(st), want)
	}
	for inst, want := range m.ByInstance {
		if got := e.byInstance(inst); !reflect.DeepEqual(got, want) {
			t.Errorf("WorkersByInstance(%s) = %v, release found %v", inst, got, want)
		}
	}
	for tenant, want := range m.TenantOpen {
		if n, err := e.st.TenantOpenJobs(ctx, tenant); err != nil || n != want {
			t.Errorf("TenantOpenJobs(%s) = %d, %v; release counted %d", tenant, n, err, want)
		}
	}
	for tenant, want := range m.TenantLeased {
		if n, err := e.st.TenantLeasedJobs(ctx, tenant); err != nil || n != want {
			t.Errorf("TenantLeasedJobs(%s) = %d, %v; release counted %d", tenant, n, err, want)
		}
	}
	got := e.others()
	for name, want := range m.Others {
		sameJSON(t, name, got[name], want)
	}
}

// checkActions: today's store carries the release's jobs and workers on.
func (e *releaseEnv) checkActions(m releaseManifest) {
	t, ctx := e.t, e.ctx
	spot := store.WorkerAuth{WorkerID: relWorkerSpot, Fleet: "gpu", TokenHash: m.TokenHashes[relWorkerSpot]}
	gpu := []string{"wf-a", "wf-b"}
	token := func(id string) string { s, _ := m.Jobs[id]["lease_token"].(string); return s }

	if _, err := e.st.Authorize(ctx, spot); err != nil {
		t.Fatalf("Authorize(%s) with its release token: %v", relWorkerSpot, err)
	}
	// The lease the release granted is heartbeated and completed.
	hb, err := e.st.Heartbeat(ctx, spot, relJobLeased, token(relJobLeased), nil)
	if err != nil || hb.Cancel || !hb.LeaseExpiresAt.After(e.clock.Now()) {
		t.Fatalf("Heartbeat(%s) = %+v, %v", relJobLeased, hb, err)
	}
	if err := e.st.Complete(ctx, spot, relJobLeased, token(relJobLeased), json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatalf("Complete(%s): %v", relJobLeased, err)
	}
	if err := e.st.Complete(ctx, spot, relJobLeased, "not-the-token", json.RawMessage(`{}`)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Complete(%s) with another token = %v, want lease lost", relJobLeased, err)
	}
	// The cancel the release recorded reaches the worker.
	if hb, err := e.st.Heartbeat(ctx, spot, relJobCancelAsked, token(relJobCancelAsked), nil); err != nil || !hb.Cancel {
		t.Fatalf("Heartbeat(%s) = %+v, %v; want cancel", relJobCancelAsked, hb, err)
	}
	if j, _ := e.st.GetJob(ctx, relJobCancelAsked); j.Status != job.Canceled {
		t.Fatalf("%s is %s after the heartbeat that told its worker to stop", relJobCancelAsked, j.Status)
	}
	// A slot lease ends and gives its slot back.
	out, err := e.st.Fail(ctx, spot, relJobCapped, token(relJobCapped), job.Error{Message: "gave up", Retryable: false})
	if err != nil || out.Status != job.Dead {
		t.Fatalf("Fail(%s) = %+v, %v", relJobCapped, out, err)
	}
	if n, _ := e.st.TenantLeasedJobs(ctx, "capped"); n != m.TenantLeased["capped"]-1 {
		t.Fatalf("capped tenant's leased jobs after a failure = %d, want %d", n, m.TenantLeased["capped"]-1)
	}
	// The queue the release left is leased in its order.
	for _, want := range []string{relJobQueuedHi, relJobPreempted, relJobQueuedLo} {
		j, err := e.st.LeaseNext(ctx, spot, gpu)
		if err != nil || j.ID != want {
			t.Fatalf("LeaseNext = %q, %v; want %s", j.ID, err, want)
		}
		if want == relJobPreempted && (j.Attempts != 1 || j.Preemptions != 1) {
			t.Fatalf("the preempted job leased with attempts %d, preemptions %d", j.Attempts, j.Preemptions)
		}
		if err := e.st.Complete(ctx, spot, j.ID, j.LeaseToken, json.RawMessage(`{}`)); err != nil {
			t.Fatalf("Complete(%s): %v", j.ID, err)
		}
	}
	// The worker waiting for approval is approved and leases its fleet's job.
	if _, err := e.st.SetWorkerApproved(ctx, relWorkerWaiting, true); err != nil {
		t.Fatal(err)
	}
	waiting := store.WorkerAuth{WorkerID: relWorkerWaiting, Fleet: "other", TokenHash: m.TokenHashes[relWorkerWaiting]}
	if j, err := e.st.LeaseNext(ctx, waiting, []string{"wf-c"}); err != nil || j.ID != relJobOther {
		t.Fatalf("LeaseNext(%s) = %q, %v", relWorkerWaiting, j.ID, err)
	}
	// A dead job is retried; a backoff runs out; an old lease expires.
	if j, err := e.st.RetryDead(ctx, relJobDead); err != nil || j.Status != job.Queued {
		t.Fatalf("RetryDead(%s) = %s, %v", relJobDead, j.Status, err)
	}
	e.clock.Advance(31 * time.Minute)
	if r, err := e.st.Sweep(ctx, "gpu"); err != nil || r.Promoted != 1 {
		t.Fatalf("Sweep = %+v, %v; want the retry promoted", r, err)
	}
	if r, err := e.st.Sweep(ctx, "other"); err != nil || r.Leases.Requeued != 1 {
		t.Fatalf("Sweep(other) = %+v, %v; want %s's expired lease requeued", r, err, relJobOther)
	}
	// The outbox the release left is relayed: every pending outcome once.
	rec := &recorder{}
	if _, err := e.st.RelayOutbox(ctx, rec, 100); err != nil {
		t.Fatal(err)
	}
	published := map[string]bool{}
	for _, ev := range rec.events {
		published[ev.Detail.JobID+"/"+ev.DetailType] = true
	}
	for _, want := range []string{relJobRetry + "/" + store.EventFailed, relJobDead + "/" + store.EventDead, relJobCanceled + "/" + store.EventCanceled} {
		if !published[want] {
			t.Errorf("the release's outbox event %s was not relayed (relayed %v)", want, published)
		}
	}
	// The release's pending callback is delivered.
	due, err := e.st.DueCallbacks(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var done *store.Callback
	for i := range due {
		if due[i].JobID == relJobDone {
			done = &due[i]
		}
	}
	if done == nil {
		t.Fatalf("the release's callback of %s is not due: %+v", relJobDone, due)
	}
	if err := e.st.RecordCallback(ctx, *done, store.CallbackResult{Delivered: true}); err != nil {
		t.Fatal(err)
	}
	if j, _ := e.st.GetJob(ctx, relJobDone); j.Callback == nil || j.Callback.State != job.CallbackDelivered {
		t.Fatalf("callback after delivery: %+v", j.Callback)
	}
	// Console markers still hold.
	if err := e.st.UseConsoleLogin(ctx, relLoginNonce, e.clock.Now().Add(time.Minute)); !errors.Is(err, store.ErrLoginUsed) {
		t.Fatalf("UseConsoleLogin(used nonce) = %v", err)
	}
	// A pending termination is found and ended.
	if _, fresh, err := e.st.StartTermination(ctx, store.Termination{InstanceID: "i-0drain", Fleet: "gpu", Group: "fleetq-test-gpu",
		Hook: "fleetq-drain", Token: "lifecycle-token-2", StartedAt: e.clock.Now(), Deadline: e.clock.Now().Add(time.Minute)}); err != nil || fresh {
		t.Fatalf("StartTermination(pending instance) = fresh %v, %v", fresh, err)
	}
	if err := e.st.EndTermination(ctx, "i-0drain"); err != nil {
		t.Fatal(err)
	}
	// A revoked key stays revoked; the worker re-registers with its key.
	if k, err := e.st.RevokeAPIKey(ctx, relAPIKey); err != nil || k.RevokedMS == 0 {
		t.Fatalf("RevokeAPIKey = %+v, %v", k, err)
	}
	w, err := e.st.RegisterWorker(ctx, store.Registration{WorkerID: relWorkerSpot, Fleet: "gpu", Stage: "test", InstanceID: "i-0spot",
		MaxConcurrency: 4, TokenHash: "hash-new", AgentKeyHash: "agentkey-" + relWorkerSpot, AgentVersion: "v9.9.9"})
	if err != nil || w.AgentVersion != "v9.9.9" || w.Status != worker.Active {
		t.Fatalf("re-register %s = %+v, %v", relWorkerSpot, w, err)
	}
}
