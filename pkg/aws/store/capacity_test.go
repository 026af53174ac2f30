package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// Today's key design under DynamoDB's capacity model (docs/benchmarks.md,
// "The key design under DynamoDB's limits"). The embedded server accounts
// every request's units per partition key per second of the test's clock,
// and can make index queries see the table as it was a while ago.

const capacityConfig = `
stage: test
fleets:
  - slug: gpu
    workflows: [wf-a]
    instance_types: [g5.xlarge]
    worker_cap: 10000
    lease_seconds: 600
`

// modeledEnv is a store on its own embedded server with a capacity model
// (and an index lag), on a fake clock that also drives the model.
type modeledEnv struct {
	*env
	model    *localaws.Capacity
	requests *atomic.Int64
	client   *dynamodb.Client
	table    string
}

func newModeledEnv(tb testing.TB, config string, lag time.Duration) *modeledEnv {
	tb.Helper()
	cfg, err := fleetconfig.Parse("capacity.yaml", []byte(config))
	if err != nil {
		tb.Fatal(err)
	}
	clk := clock.NewFake(t0)
	model := localaws.NewCapacity()
	n := new(atomic.Int64)
	client, table := testenv.ModeledDynamoDB(tb, localaws.DynamoDBOptions{Capacity: model, IndexLag: lag, Now: clk.Now}, testenv.Counter(n))
	e := &env{ctx: context.Background(), clock: clk, cfg: cfg}
	if t, ok := tb.(*testing.T); ok {
		e.t = t
	}
	e.st = store.New(client, store.Options{Table: table, Config: cfg, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	return &modeledEnv{env: e, model: model, requests: n, client: client, table: table}
}

// newStore is another process's store (a warm API instance) on the same table.
func (m *modeledEnv) newStore() *store.Store {
	return store.New(m.client, store.Options{Table: m.table, Config: m.cfg, Clock: m.clock, Logger: slog.New(slog.DiscardHandler)})
}

func (m *modeledEnv) createJobs(tb testing.TB, prefix string, n int) {
	tb.Helper()
	for i := range n {
		_, _, err := m.st.CreateJob(m.ctx, job.Spec{ID: fmt.Sprintf("%s-%05d", prefix, i), TenantID: "t", WorkflowID: "wf-a", Input: json.RawMessage(`{"frames":120,"scene":"s3://bucket/scenes/a.usd"}`)})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func (m *modeledEnv) registerWorkers(tb testing.TB, n, slots int) []store.WorkerAuth {
	tb.Helper()
	auths := make([]store.WorkerAuth, n)
	for i := range auths {
		auths[i] = m.registerWorker(tb, i, slots)
	}
	return auths
}

// registerWorker registers worker number i of the fleet.
func (m *modeledEnv) registerWorker(tb testing.TB, i, slots int) store.WorkerAuth {
	tb.Helper()
	a := store.WorkerAuth{WorkerID: fmt.Sprintf("w%05d", i), Fleet: "gpu", TokenHash: fmt.Sprintf("hash-%d", i)}
	_, err := m.st.RegisterWorker(m.ctx, store.Registration{WorkerID: a.WorkerID, Fleet: "gpu", Stage: "test",
		InstanceID: "i-" + a.WorkerID, InstanceType: "g5.xlarge", AZ: "us-east-1a", MaxConcurrency: slots, TokenHash: a.TokenHash})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// wantWritesSpread fails unless the table's partition keys starting with
// prefix (its shards) took writes on at least four keys, none of them more
// than most write units; what names the writes in the message.
func (m *modeledEnv) wantWritesSpread(t *testing.T, what, prefix string, most float64) {
	t.Helper()
	keys := map[string]float64{}
	for _, l := range m.model.Loads() {
		if l.Index == "" && strings.HasPrefix(l.Key, prefix) {
			keys[l.Key] += l.Units.Write
		}
	}
	if len(keys) < 4 {
		t.Fatalf("%s went to %d partition keys (%v), want them spread over its shards", what, len(keys), keys)
	}
	for k, w := range keys {
		if w > most {
			t.Fatalf("%s: shard %s took %.0f write units, want at most %.0f: not spread", what, k, w, most)
		}
	}
}

// nextSecond moves the clock to the start of the next whole second and
// forgets what the model counted so far.
func (m *modeledEnv) nextSecond() {
	now := m.clock.Now()
	m.clock.Advance(now.Truncate(time.Second).Add(time.Second).Sub(now))
	m.model.Reset()
	m.requests.Store(0)
}

// Creations put a job's entry in its fleet's ready partition of the
// by-state index, so 1,001 creations of one fleet in one second put that
// partition past DynamoDB's 1,000 write units per partition key. The model
// fails it.
func TestCapacityModelFailsAHotReadyPartition(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, capacityConfig, 0)
	m.nextSecond()
	m.createJobs(t, "job", 1001)
	err := m.model.Err()
	if err == nil {
		t.Fatal("1,001 creations in one second of one fleet: the model found every partition within its limit")
	}
	if !strings.Contains(err.Error(), `by-state key "Q#gpu"`) {
		t.Fatalf("Err() = %v, want the fleet's ready partition named", err)
	}
	hot := m.model.Hottest()
	if hot.Index != store.IndexByState || hot.Key != "Q#gpu" || hot.Units.Write < 1001 {
		t.Fatalf("hottest = %v, want by-state Q#gpu with at least 1,001 write units", hot)
	}
}

// A heartbeat writes the job item and nothing else: no index entry moves
// (the live expiry, lease_until_ms, is not projected) and the worker item
// is left alone. 520 heartbeats in one second of one fleet, which put the
// leased partition at 1,040 write units when each moved its entry, write
// 520 units, each on its own job's key.
func TestHeartbeatsWriteOnlyTheJobItem(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, capacityConfig, 0)
	m.createJobs(t, "job", 10)
	w := m.registerWorkers(t, 1, 10)[0]
	var leases []job.Job
	for range 10 {
		leases = append(leases, m.lease(w))
	}
	m.nextSecond()
	for i := range 520 {
		m.clock.Advance(time.Millisecond)
		j := leases[i%len(leases)]
		if _, err := m.st.Heartbeat(m.ctx, w, j.ID, j.LeaseToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.model.Err(); err != nil {
		t.Fatalf("520 heartbeats in one second: %v", err)
	}
	if idx := m.model.ByIndex()[store.IndexByState]; idx.Write != 0 {
		t.Fatalf("heartbeats wrote %.0f units to by-state, want none", idx.Write)
	}
	if tot := m.model.Total(); tot.Write != 520 {
		t.Fatalf("520 heartbeats wrote %.0f units, want 520 (one per job item)", tot.Write)
	}
	if n := m.requests.Load(); n != 520 {
		t.Fatalf("520 heartbeats sent %d requests, want 520", n)
	}
	for _, l := range m.model.Loads() {
		if strings.HasPrefix(l.Key, "WORKER#") {
			t.Fatalf("a heartbeat wrote the worker item: %v", l)
		}
	}
}

// A lease that heartbeats outlives the expiry the index files it under: the
// sweep that finds it there refiles its entry at the heartbeat's expiry
// (one write, a delete and a put in the index), so the sweeps after it do
// not read it again until then, and it runs out when the heartbeats stop.
func TestSweepRefilesALeaseItsHeartbeatsExtended(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, capacityConfig, 0) // lease_seconds: 600
	m.createJobs(t, "job", 1)
	w := m.registerWorkers(t, 1, 1)[0]
	j := m.lease(w)
	m.clock.Advance(500 * time.Second)
	if _, err := m.st.Heartbeat(m.ctx, w, j.ID, j.LeaseToken, nil); err != nil { // until 1,100 s
		t.Fatal(err)
	}
	m.clock.Advance(200 * time.Second) // 700 s: past the filed 600 s
	m.nextSecond()
	if r, err := m.st.Sweep(m.ctx, "gpu"); err != nil || r.Leases != (lease.Expired{}) {
		t.Fatalf("sweep = %+v, %v; want nothing ended", r, err)
	}
	// The sweep's other two steps query once each (due retries, queue
	// deadlines) and find nothing.
	if n := m.requests.Load(); n != 5 {
		t.Fatalf("the refiling sweep sent %d requests, want 5 (two empty queries, then query, read, refile)", n)
	}
	if idx := m.model.ByIndex()[store.IndexByState]; idx.Write != 2 {
		t.Fatalf("the refile wrote %.0f index units, want 2 (the entry moved)", idx.Write)
	}
	m.nextSecond()
	if r, err := m.st.Sweep(m.ctx, "gpu"); err != nil || r.Leases != (lease.Expired{}) {
		t.Fatalf("second sweep = %+v, %v", r, err)
	}
	if n := m.requests.Load(); n != 3 {
		t.Fatalf("the sweep after the refile sent %d requests, want 3 (each step's query finds nothing)", n)
	}
	m.clock.Advance(400 * time.Second) // past 1,100 s
	if r, err := m.st.Sweep(m.ctx, "gpu"); err != nil || r.Leases.Requeued != 1 {
		t.Fatalf("sweep past the heartbeat's expiry = %+v, %v; want the lease ended", r, err)
	}
	m.wantStatus(j.ID, job.Queued)
}

// A lease, a heartbeat and a completion run end to end on the modeled
// server with an index lag, so the lag cannot break the lease path: a poll
// that finds nothing in the lagging index leases once the index caught up.
func TestLeasePathWorksWithLaggingIndexes(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, capacityConfig, 500*time.Millisecond)
	m.createJobs(t, "job", 1)
	w := m.registerWorkers(t, 1, 1)[0]
	if _, err := m.st.LeaseNext(m.ctx, w, []string{"wf-a"}); !errors.Is(err, store.ErrNoJob) {
		t.Fatalf("a poll before the index caught up = %v, want ErrNoJob", err)
	}
	m.clock.Advance(500 * time.Millisecond)
	j := m.lease(w)
	if _, err := m.st.Heartbeat(m.ctx, w, j.ID, j.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.st.Complete(m.ctx, w, j.ID, j.LeaseToken, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	m.wantStatus(j.ID, job.Succeeded)
}

// An idle worker's empty polls write its last_seen_ms (projected into the
// fleet's workers partition) at most once a heartbeat interval: the polls
// between write nothing to an index, and still refuse a bad token or a
// revoked worker.
func TestEmptyPollsWriteTheWorkersPartitionOnceAHeartbeatInterval(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, capacityConfig, 0)
	w := m.registerWorkers(t, 1, 1)[0]
	poll := func() error {
		_, err := m.st.LeaseNext(m.ctx, w, []string{"wf-a"})
		return err
	}
	workersPartition := func() float64 {
		for _, l := range m.model.Loads() {
			if l.Index == store.IndexByState && l.Key == "W#gpu" {
				return l.Units.Write
			}
		}
		return 0
	}
	m.nextSecond()
	for range 5 { // 25 s of polls every 5 s, within the 30 s heartbeat interval
		if err := poll(); !errors.Is(err, store.ErrNoJob) {
			t.Fatalf("empty poll = %v, want ErrNoJob", err)
		}
		m.clock.Advance(5 * time.Second)
	}
	if n := workersPartition(); n != 0 {
		t.Fatalf("polls within a heartbeat interval of the registration wrote %.0f units to W#gpu, want none", n)
	}
	if seen := m.worker(w.WorkerID).LastSeenAt; !seen.Equal(t0) {
		t.Fatalf("last seen %s, want the registration's %s", seen, t0)
	}
	m.clock.Advance(5 * time.Second) // 30 s since it was seen
	if err := poll(); !errors.Is(err, store.ErrNoJob) {
		t.Fatal(err)
	}
	if n := workersPartition(); n != 1 {
		t.Fatalf("the poll a heartbeat interval on wrote %.0f units to W#gpu, want 1", n)
	}
	if seen := m.worker(w.WorkerID).LastSeenAt; !seen.Equal(m.clock.Now()) {
		t.Fatalf("last seen %s, want now %s", seen, m.clock.Now())
	}
	m.clock.Advance(5 * time.Second)
	bad := w
	bad.TokenHash = "hash-of-another-token"
	if _, err := m.st.LeaseNext(m.ctx, bad, []string{"wf-a"}); !errors.Is(err, store.ErrUnauthenticated) {
		t.Fatalf("an empty poll with a bad token = %v, want ErrUnauthenticated", err)
	}
	if _, err := m.st.RevokeWorker(m.ctx, w.WorkerID); err != nil {
		t.Fatal(err)
	}
	if err := poll(); !errors.Is(err, store.ErrRevoked) {
		t.Fatalf("an empty poll of a revoked worker = %v, want ErrRevoked", err)
	}
}
