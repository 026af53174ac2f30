package store_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

// The ready queue's shards (ready.go, docs/data-model.md "The ready
// queue's shards").

const shardedCapacityConfig = capacityConfig + "    ready_shards: 4\n"

func mustParse(t testing.TB, config string) *fleetconfig.Config {
	t.Helper()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Jobs spread over the four shards' partition keys, and a poll still
// leases in strict priority-then-age order (spread 1): it reads the head
// of every shard, one query each, and merges them.
func TestShardedReadyQueueKeepsPriorityThenAge(t *testing.T) {
	m := newModeledEnv(t, shardedCapacityConfig, 0)
	st := store.New(m.client, store.Options{Table: m.table, Config: m.cfg, Clock: m.clock, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)})
	type queued struct {
		id       string
		priority int
	}
	var want []queued
	for i := range 24 {
		q := queued{id: fmt.Sprintf("job-%02d", i), priority: []int{0, 5, 1}[i%3]}
		if _, _, err := st.CreateJob(m.ctx, job.Spec{ID: q.id, TenantID: "t", WorkflowID: "wf-a", Priority: q.priority, Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, q)
		m.clock.Advance(time.Millisecond) // each job older than the next
	}
	shards := map[string]int{}
	for _, l := range m.model.Loads() {
		if l.Index == store.IndexByState && strings.HasPrefix(l.Key, "Q#gpu") {
			shards[l.Key] += int(l.Units.Write)
		}
	}
	if len(shards) != 4 {
		t.Fatalf("creations wrote %v, want the four shards Q#gpu, Q#gpu#1..3", shards)
	}
	slices.SortStableFunc(want, func(a, b queued) int { return b.priority - a.priority })
	w := m.registerWorkers(t, 1, 24)[0]
	for i, q := range want {
		before := m.requests.Load()
		j, err := st.LeaseNext(m.ctx, w, []string{"wf-a"})
		if err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
		if j.ID != q.id {
			t.Fatalf("lease %d is %s (priority %d), want %s (priority %d)", i, j.ID, j.Priority, q.id, q.priority)
		}
		if n := m.requests.Load() - before; n != 6 {
			t.Fatalf("lease %d sent %d requests, want 6 (four shard queries, the claim, the read)", i, n)
		}
	}
}

// Jobs queued while the fleet had one shard are in shard 0, the one
// partition it had: a store with four shards counts, lists and leases
// them, and a job given back goes to its own shard.
func TestJobsQueuedBeforeShardingAreLeased(t *testing.T) {
	m := newModeledEnv(t, capacityConfig, 0) // one shard
	m.createJobs(t, "old", 6)
	sharded := store.New(m.client, store.Options{Table: m.table, Config: mustParse(t, shardedCapacityConfig), Clock: m.clock, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)})
	if b, err := sharded.CountBacklog(m.ctx, "gpu"); err != nil || b.Ready != 6 {
		t.Fatalf("backlog = %+v, %v; want 6 ready", b, err)
	}
	if l, err := sharded.ListJobs(m.ctx, "gpu", job.Queued, 10); err != nil || len(l) != 6 || l[0].ID != "old-00000" {
		t.Fatalf("queued listing = %v, %v", l, err)
	}
	w := m.registerWorkers(t, 1, 6)[0]
	var leased []job.Job
	for i := range 6 {
		j, err := sharded.LeaseNext(m.ctx, w, []string{"wf-a"})
		if err != nil || j.ID != fmt.Sprintf("old-%05d", i) {
			t.Fatalf("lease %d = %s, %v", i, j.ID, err)
		}
		leased = append(leased, j)
	}
	for _, j := range leased {
		if _, err := sharded.Requeue(m.ctx, w, j.ID, j.LeaseToken, job.SpotInterruption); err != nil {
			t.Fatal(err)
		}
	}
	m.nextSecond()
	if b, err := sharded.CountBacklog(m.ctx, "gpu"); err != nil || b.Ready != 6 || b.Leased != 0 {
		t.Fatalf("backlog after the requeues = %+v, %v; want 6 ready", b, err)
	}
	snap, err := sharded.FleetSnapshot(m.ctx, "gpu")
	if err != nil || snap.Ready != 6 {
		t.Fatalf("snapshot = %+v, %v", snap, err)
	}
	for i := range 6 {
		if j, err := sharded.LeaseNext(m.ctx, w, []string{"wf-a"}); err != nil || j.ID != fmt.Sprintf("old-%05d", i) {
			t.Fatalf("lease %d after the requeues = %s, %v", i, j.ID, err)
		}
	}
}
