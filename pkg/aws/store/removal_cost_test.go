package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// newCountingEnv is newEnv whose DynamoDB client counts its requests (the
// SDK middleware) into the answer.
func newCountingEnv(t *testing.T) (*env, *atomic.Int64) {
	t.Helper()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int64)
	client, table := testenv.DynamoDB(t, testenv.Counter(n))
	clk := clock.NewFake(t0)
	st := store.New(client, store.Options{Table: table, Config: cfg, Clock: clk, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)})
	return &env{t: t, ctx: context.Background(), clock: clk, cfg: cfg, st: st}, n
}

// TestRemovingStaleWorkersFromTheSnapshotCostsAtMostOnePlusTwoNPlusL: the
// tick removes n stale workers holding L leases from the workers its
// snapshot read, in at most 1 + 2n + L requests with one shard (one read of
// the leased partition, a transaction per lease, a delete per worker), and
// shards + 2n + L with more (a read of each of the fleet's leased shards),
// requeuing the leases without an attempt.
func TestRemovingStaleWorkersFromTheSnapshotCostsAtMostOnePlusTwoNPlusL(t *testing.T) {
	t.Parallel()
	for _, leases := range [][]int{{0}, {1}, {0, 2, 1}} {
		t.Run(fmt.Sprint(leases), func(t *testing.T) {
			e, n := newCountingEnv(t)
			var jobs []string
			for i, k := range leases {
				a := e.register(fmt.Sprintf("w%d", i), "gpu", 2)
				for j := range k {
					id := fmt.Sprintf("j%d-%d", i, j)
					e.submit(id, "wf-a", 0)
					if l := e.lease(a); l.ID != id {
						t.Fatalf("leased %s, want %s", l.ID, id)
					}
					jobs = append(jobs, id)
				}
			}
			ws, err := e.st.ListWorkers(e.ctx, "gpu")
			if err != nil || len(ws) != len(leases) {
				t.Fatalf("workers %+v, %v", ws, err)
			}
			before := n.Load()
			removed, err := e.st.RemoveStaleWorkers(e.ctx, ws, t0.Add(time.Minute))
			cost := n.Load() - before
			if err != nil || len(removed) != len(leases) {
				t.Fatalf("removed %v, %v", removed, err)
			}
			f, _ := e.cfg.Fleet("gpu")
			if budget := int64(f.ReadyShards + 2*len(leases) + len(jobs)); cost > budget {
				t.Errorf("%d stale workers with %d leases cost %d requests, budget %d", len(leases), len(jobs), cost, budget)
			}
			for _, id := range jobs {
				if j := e.wantStatus(id, job.Queued); j.Attempts != 0 || j.Preemptions != 1 || j.Reason != job.ReasonStale {
					t.Fatalf("%s: attempts %d preemptions %d reason %q", id, j.Attempts, j.Preemptions, j.Reason)
				}
			}
			if left, err := e.st.ListWorkers(e.ctx, "gpu"); err != nil || len(left) != 0 {
				t.Fatalf("workers left %+v, %v", left, err)
			}
		})
	}
}

// TestRemovingAScaleInVictimCostsOneRequest: a victim the tick drained
// while idle is deleted from the snapshot's worker in one transaction.
func TestRemovingAScaleInVictimCostsOneRequest(t *testing.T) {
	t.Parallel()
	e, n := newCountingEnv(t)
	e.register("w1", "gpu", 1)
	ws, err := e.st.ListWorkers(e.ctx, "gpu")
	if err != nil || len(ws) != 1 {
		t.Fatalf("workers %+v, %v", ws, err)
	}
	if err := e.st.DrainIdleWorker(e.ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	before := n.Load()
	if err := e.st.RemoveIdleWorker(e.ctx, ws[0]); err != nil {
		t.Fatal(err)
	}
	if cost := n.Load() - before; cost != 1 {
		t.Fatalf("removing the victim cost %d requests, want 1", cost)
	}
	if _, err := e.st.GetWorker(e.ctx, "w1"); err == nil {
		t.Fatal("the victim is still there")
	}
	// Removed twice (a retried tick): already gone is not an error.
	if err := e.st.RemoveIdleWorker(e.ctx, ws[0]); err != nil {
		t.Fatal(err)
	}
}
