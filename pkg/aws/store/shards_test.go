package store_test

import (
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// The shards of a fleet's leased, succeeded and workers partitions
// (shards.go, docs/data-model.md "Shards of a fleet's partitions").

// shardKeys are the by-state partition keys of the family prefix (such as
// "L#gpu") the model saw written, with their write units.
func (m *modeledEnv) shardKeys(prefix string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range m.model.Loads() {
		if l.Index == store.IndexByState && (l.Key == prefix || strings.HasPrefix(l.Key, prefix+"#")) && l.Units.Write > 0 {
			out[l.Key] += l.Units.Write
		}
	}
	return out
}

// wantFourShards fails unless writes landed in the four shards of prefix.
func (m *modeledEnv) wantFourShards(t *testing.T, prefix string) {
	t.Helper()
	keys := m.shardKeys(prefix)
	for _, k := range []string{prefix, prefix + "#1", prefix + "#2", prefix + "#3"} {
		if keys[k] == 0 {
			t.Fatalf("writes landed in %v, want all four shards of %s", keys, prefix)
		}
	}
}

func (m *modeledEnv) listIDs(t *testing.T, status job.Status, limit int) []string {
	t.Helper()
	l, err := m.st.ListJobs(m.ctx, "gpu", status, limit)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range l {
		ids = append(ids, s.ID)
	}
	return ids
}

// Leases are filed in the four shards of L#gpu by job id, and every reader
// of the leased jobs reads them all: the operators' listing (in expiry
// order), the backlog count, the scaler's snapshot (leases per worker), the
// requeue of a worker's leases (an interruption) and the sweep of expired
// leases.
func TestLeasesInEveryLeasedShardAreFoundByEveryReader(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, shardedCapacityConfig, 0) // lease_seconds: 600
	m.createJobs(t, "job", 16)
	ws := m.registerWorkers(t, 2, 8)
	m.nextSecond()
	held := map[string][]string{}
	var order []string
	for i := range 16 {
		w := ws[i%2]
		j := m.lease(w)
		held[w.WorkerID] = append(held[w.WorkerID], j.ID)
		order = append(order, j.ID)
		m.clock.Advance(time.Millisecond) // each lease expires after the one before
	}
	m.wantFourShards(t, "L#gpu")

	if got := m.listIDs(t, job.Leased, 0); !slices.Equal(got, order) {
		t.Fatalf("leased listing = %v, want every lease in expiry order %v", got, order)
	}
	if got := m.listIDs(t, job.Leased, 5); !slices.Equal(got, order[:5]) {
		t.Fatalf("leased listing of 5 = %v, want the first to expire %v", got, order[:5])
	}
	if b, err := m.st.CountBacklog(m.ctx, "gpu"); err != nil || b.Leased != 16 || b.Ready != 0 {
		t.Fatalf("backlog = %+v, %v; want 16 leased", b, err)
	}
	snap, err := m.st.FleetSnapshot(m.ctx, "gpu")
	if err != nil || snap.Leased != 16 || snap.LeasesByWorker[ws[0].WorkerID] != 8 || snap.LeasesByWorker[ws[1].WorkerID] != 8 {
		t.Fatalf("snapshot = leased %d by worker %v, %v; want 8 each", snap.Leased, snap.LeasesByWorker, err)
	}

	if n, err := m.st.RequeueWorkerLeases(m.ctx, ws[0].WorkerID, job.SpotInterruption.Reason()); err != nil || n != 8 {
		t.Fatalf("requeue of %s's leases = %d, %v; want 8", ws[0].WorkerID, n, err)
	}
	for _, id := range held[ws[0].WorkerID] {
		if j := m.wantStatus(id, job.Queued); j.Preemptions != 1 || j.Attempts != 0 {
			t.Fatalf("%s requeued with attempts %d, preemptions %d", id, j.Attempts, j.Preemptions)
		}
	}
	m.wantLeases(ws[0].WorkerID, 0)

	m.clock.Advance(601 * time.Second)
	if r, err := m.st.Sweep(m.ctx, "gpu"); err != nil || r.Leases.Requeued != 8 {
		t.Fatalf("sweep = %+v, %v; want %s's 8 leases requeued", r, err, ws[1].WorkerID)
	}
	for _, id := range held[ws[1].WorkerID] {
		if j := m.wantStatus(id, job.Queued); j.Attempts != 1 {
			t.Fatalf("%s expired with attempts %d, want 1", id, j.Attempts)
		}
	}
	m.wantLeases(ws[1].WorkerID, 0)
}

// A poll with nothing ready sweeps the expired leases of every shard and
// leases them.
func TestAPollLeasesAnExpiredLeaseOfAnyShard(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, shardedCapacityConfig, 0)
	m.createJobs(t, "job", 8)
	w := m.registerWorkers(t, 1, 8)[0]
	var first []string
	for range 8 {
		first = append(first, m.lease(w).ID)
	}
	m.wantFourShards(t, "L#gpu")
	m.clock.Advance(601 * time.Second)
	var again []string
	for range 8 {
		again = append(again, m.lease(w).ID)
	}
	slices.Sort(first)
	slices.Sort(again)
	if !slices.Equal(first, again) {
		t.Fatalf("polls after the leases ran out leased %v, want %v", again, first)
	}
}

// Completions are filed in the four shards of S#gpu by job id; the
// operators' listing reads them newest first and the scaler's recent
// outcomes count them all.
func TestSucceededJobsInEveryShardAreListedAndCounted(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, shardedCapacityConfig, 0)
	m.createJobs(t, "job", 16)
	w := m.registerWorkers(t, 1, 1)[0]
	since := m.clock.Now()
	m.nextSecond()
	var done []string
	for range 16 {
		j := m.lease(w)
		m.clock.Advance(time.Second)
		if err := m.st.Complete(m.ctx, w, j.ID, j.LeaseToken, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		done = append([]string{j.ID}, done...) // newest first
	}
	m.wantFourShards(t, "S#gpu")
	if got := m.listIDs(t, job.Succeeded, 0); !slices.Equal(got, done) {
		t.Fatalf("succeeded listing = %v, want newest first %v", got, done)
	}
	if got := m.listIDs(t, job.Succeeded, 3); !slices.Equal(got, done[:3]) {
		t.Fatalf("succeeded listing of 3 = %v, want the newest %v", got, done[:3])
	}
	o, err := m.st.RecentOutcomes(m.ctx, "gpu", since)
	if err != nil || o.Succeeded != 16 || len(o.Runs) != 16 {
		t.Fatalf("recent outcomes = %d succeeded, %d runs, %v; want 16", o.Succeeded, len(o.Runs), err)
	}
	if o, err := m.st.RecentOutcomes(m.ctx, "gpu", m.clock.Now().Add(-2500*time.Millisecond)); err != nil || o.Succeeded != 3 {
		t.Fatalf("outcomes of the last 3 s = %d, %v; want 3", o.Succeeded, err)
	}
}

// At 1,000 leases and 1,000 completions a second, one key per fleet for the
// leased jobs, the workers and the succeeded jobs is past 80% of
// DynamoDB's 1,000 write units a second on each (a put and a delete of a
// job's L# entry, two changes of its worker's W# entry, a put in S#), and
// four shards bring every one of them under it. A sample of 40 leases and
// completions in one second of the model is scaled to the rate.
func TestLeasesAtAThousandASecondNeedFourShards(t *testing.T) {
	t.Parallel()
	const jobs, rate = 40, 1000
	for _, c := range []struct {
		name, config string
		over         bool
	}{{"one key", capacityConfig, true}, {"four shards", shardedCapacityConfig, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := newModeledEnv(t, c.config, 0)
			m.createJobs(t, "job", jobs)
			ws := m.registerWorkers(t, 10, 4)
			m.nextSecond()
			for i := range jobs {
				w := ws[i%len(ws)]
				j := m.lease(w)
				if err := m.st.Complete(m.ctx, w, j.ID, j.LeaseToken, json.RawMessage(`{}`)); err != nil {
					t.Fatal(err)
				}
				m.clock.Advance(time.Second / (2 * jobs))
			}
			for _, family := range []string{"L#gpu", "W#gpu", "S#gpu"} {
				hottest := 0.0
				for _, u := range m.shardKeys(family) {
					hottest = max(hottest, u)
				}
				share := hottest * rate / jobs / 1000 // of the partition's 1,000 write units a second
				if c.over && share <= 0.8 {
					t.Errorf("%s: the hottest key at %d leases a second takes %.0f%% of its limit, want over 80%%", family, rate, 100*share)
				}
				if !c.over && share >= 0.8 {
					t.Errorf("%s: the hottest shard at %d leases a second takes %.0f%% of its limit, want under 80%% (%v)", family, rate, 100*share, m.shardKeys(family))
				}
			}
		})
	}
}

// shardOf is the shard an id is filed in among n: FNV-1a of the id, modulo n.
func shardOf(id string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// Workers are filed in the four shards of W#gpu by worker id (FNV-1a, as
// jobs are); the fleet's worker listing reads them all, in id order, and
// what happens to a worker in any shard (a drain, a claim, a removal) shows
// in it.
func TestWorkersInEveryShardAreListed(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, shardedCapacityConfig, 0)
	ws := m.registerWorkers(t, 12, 1)
	m.wantFourShards(t, "W#gpu")
	var ids []string
	var far store.WorkerAuth // a worker in shard 3
	for _, w := range ws {
		ids = append(ids, w.WorkerID)
		if shardOf(w.WorkerID, 4) == 3 {
			far = w
		}
	}
	if far.WorkerID == "" {
		t.Fatal("no worker hashes to shard 3")
	}
	list := func() []worker.Worker {
		t.Helper()
		l, err := m.st.ListWorkers(m.ctx, "gpu")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	find := func(id string) worker.Worker {
		t.Helper()
		for _, w := range list() {
			if w.ID == id {
				return w
			}
		}
		t.Fatalf("%s is not listed", id)
		return worker.Worker{}
	}
	var got []string
	for _, w := range list() {
		got = append(got, w.ID)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("workers listed %v, want %v", got, ids)
	}
	m.createJobs(t, "job", 1)
	j := m.lease(far)
	if w := find(far.WorkerID); w.Leases != 1 || !w.LastClaimAt.Equal(m.clock.Now()) {
		t.Fatalf("%s listed with %d leases, last claim %s, after its claim", far.WorkerID, w.Leases, w.LastClaimAt)
	}
	if _, err := m.st.DrainWorker(m.ctx, far.WorkerID); err != nil {
		t.Fatal(err)
	}
	if w := find(far.WorkerID); w.Status != worker.Draining {
		t.Fatalf("%s listed as %s after its drain", far.WorkerID, w.Status)
	}
	m.clock.Advance(3 * time.Hour)
	removed, err := m.st.RemoveStaleWorkers(m.ctx, list(), m.clock.Now().Add(-2*time.Hour))
	if err != nil || len(removed) != 12 {
		t.Fatalf("stale workers removed %v, %v; want all 12", removed, err)
	}
	if l := list(); len(l) != 0 {
		t.Fatalf("workers left %v", l)
	}
	m.wantStatus(j.ID, job.Queued)
}

// The release fixtures' items, filed in shard 0 of every partition as the
// release wrote them, are read and carried on by a store whose fleets have
// four shards, as after an upgrade that raised the count.
func TestReleaseItemsReadByAShardedStore(t *testing.T) {
	t.Parallel()
	for _, dir := range releaseDirs(t) {
		t.Run(dir, func(t *testing.T) {
			e, m := loadRelease(t, dir)
			e.shardFleets(4)
			e.checkReads(m)
			if t.Failed() {
				return
			}
			e.checkActions(m)
		})
	}
}

// shardFleets makes the env's store one whose fleets have n shards.
func (e *releaseEnv) shardFleets(n int) {
	cfg := *e.cfg
	cfg.Fleets = slices.Clone(cfg.Fleets)
	for i := range cfg.Fleets {
		cfg.Fleets[i].ReadyShards = n
	}
	e.st = store.New(e.client, store.Options{Table: e.table, Config: &cfg, Clock: e.clock, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)})
}

// A poll that finds nothing ready brings back a run-out lease itself, and
// reads that job once: the expiry reads it to end the lease and hands the
// job as it wrote it to the planner, which claims it; the claim's own read
// is the job under the new lease. With four shards: four empty ready
// queries, the due retries' query, four leased queries, the expiry's read
// and write, the claim and its read: 13 requests.
func TestAPollReadsAJobItReclaimsOnce(t *testing.T) {
	t.Parallel()
	m := newModeledEnv(t, shardedCapacityConfig, 0) // lease_seconds: 600
	m.createJobs(t, "job", 1)
	ws := m.registerWorkers(t, 2, 1)
	first := m.lease(ws[0])
	m.clock.Advance(601 * time.Second)
	m.nextSecond()
	again := m.lease(ws[1])
	if again.ID != first.ID || again.Attempts != 2 {
		t.Fatalf("the poll leased %s (attempt %d), want %s's second attempt", again.ID, again.Attempts, first.ID)
	}
	if n := m.requests.Load(); n != 13 {
		t.Fatalf("the poll that reclaimed one lease sent %d requests, want 13 (the reclaimed job read once by the expiry, once under its new lease)", n)
	}
}
