package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/eta"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// readCounter counts the read requests of the real client and the read
// units they cost as DynamoDB bills them: an eventually consistent Query
// half a unit per 4 KB it reads (at least half a unit), a strongly
// consistent GetItem a unit per 4 KB (at least one). Item sizes are
// estimated as DynamoDB sizes them: attribute names plus values.
type readCounter struct {
	*dynamodb.Client
	mu             sync.Mutex
	queries, gets  int
	units, entries float64
}

func (c *readCounter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.Client.Query(ctx, in, o...)
	if err == nil {
		c.mu.Lock()
		c.queries++
		size := 0
		for _, it := range out.Items {
			size += itemBytes(it)
		}
		c.entries += float64(len(out.Items))
		c.units += math.Max(0.5, math.Ceil(float64(size)/4096)/2)
		c.mu.Unlock()
	}
	return out, err
}

func (c *readCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.Client.GetItem(ctx, in, o...)
	if err == nil {
		c.mu.Lock()
		c.gets++
		c.units += math.Max(1, math.Ceil(float64(itemBytes(out.Item))/4096))
		c.mu.Unlock()
	}
	return out, err
}

func itemBytes(it map[string]types.AttributeValue) int {
	n := 0
	for k, v := range it {
		n += len(k) + valueBytes(v)
	}
	return n
}

func valueBytes(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberM:
		return 3 + itemBytes(v.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, x := range v.Value {
			n += 1 + valueBytes(x)
		}
		return n
	}
	return 1
}

// What one fleet's estimate snapshot costs, uncached: the requests are
// fixed by the fleet's shards (and the boots sampled), the read units
// follow the live backlog. The fleet has 4 shards, 100 queued jobs, 10
// leased, 2 workers and 20 jobs succeeded in the last hour.
func TestEstimateSnapshotCost(t *testing.T) {
	e := newEnv(t)
	w1, w2 := e.register("w1", "gpu", 10), e.register("w2", "gpu", 10)
	for i := range 20 {
		e.submit(fmt.Sprint("done-", i), "wf-a", 0)
		j := e.lease(w1)
		e.clock.Advance(time.Second)
		if err := e.st.Complete(e.ctx, w1, j.ID, j.LeaseToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 110 {
		e.submit(fmt.Sprint("q-", i), "wf-a", 0)
	}
	for i := range 10 {
		w := w1
		if i%2 == 1 {
			w = w2
		}
		e.lease(w)
	}
	db := &readCounter{Client: localaws.DynamoDBClient(testenv.DynamoDBEndpoint(t))}
	st := store.New(db, store.Options{Table: e.st.Table(), Config: e.cfg, Clock: e.clock, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)})
	snap, err := st.EstimateSnapshot(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Queued) != 100 || len(snap.Running) != 10 || len(snap.Workers) != 2 || len(snap.RunTimes["wf-a"]) != 20 || len(snap.RunTimes[""]) != 20 {
		t.Fatalf("snapshot of %d queued, %d running, %d workers, %d runs", len(snap.Queued), len(snap.Running), len(snap.Workers), len(snap.RunTimes["wf-a"]))
	}
	const shards = 4
	// ready, leased, succeeded and workers per shard, delayed once; the
	// fleet's state.
	if wantQ, wantG := 4*shards+1, 1; db.queries != wantQ || db.gets != wantG {
		t.Errorf("%d queries and %d reads, want %d and %d", db.queries, db.gets, wantQ, wantG)
	}
	t.Logf("one snapshot: %d queries, %d item reads, %.0f index entries, %.1f read units", db.queries, db.gets, db.entries, db.units)
}

// A fleet with more queued jobs than a projection follows reads only the
// head of its queue, eta.MaxProjected jobs and a job more per shard at
// most, and says that more are queued (the API answers a job behind the
// head beyond_horizon: TestAJobBehindTheSnapshotIsBeyondIt).
func TestEstimateSnapshotReadsTheQueuesHead(t *testing.T) {
	e := newEnv(t)
	n := eta.MaxProjected + 40
	for i := range n {
		e.submit(fmt.Sprintf("q-%04d", i), "wf-a", 0)
		e.clock.Advance(time.Millisecond)
	}
	db := &readCounter{Client: localaws.DynamoDBClient(testenv.DynamoDBEndpoint(t))}
	st := store.New(db, store.Options{Table: e.st.Table(), Config: e.cfg, Clock: e.clock, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)})
	snap, err := st.EstimateSnapshot(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	const shards = 4
	if len(snap.Queued) > eta.MaxProjected || len(snap.Queued) < eta.MaxProjected/shards || snap.Beyond < 1 {
		t.Fatalf("snapshot of %d queued and %d beyond, want at most %d and some beyond", len(snap.Queued), snap.Beyond, eta.MaxProjected)
	}
	for i, q := range snap.Queued {
		if q.JobID != fmt.Sprintf("q-%04d", i) {
			t.Fatalf("queued %d is %s: not the queue's head", i, q.JobID)
		}
	}
	if db.entries > eta.MaxProjected+shards {
		t.Errorf("read %.0f index entries, want at most %d", db.entries, eta.MaxProjected+shards)
	}
	// ready, leased, succeeded and workers per shard; the fleet's state.
	if wantQ := 4 * shards; db.queries > wantQ+1 || db.gets != 1 {
		t.Errorf("%d queries and %d reads, want at most %d and 1", db.queries, db.gets, wantQ+1)
	}
	es := eta.Project(snap, e.clock.Now())
	last := es[len(es)-1]
	if last.JobID != fmt.Sprintf("q-%04d", len(snap.Queued)-1) || last.Position != len(snap.Queued) {
		t.Fatalf("the last estimate %+v", last)
	}
	t.Logf("one snapshot of a queue of %d: %d queries, %d item reads, %.0f index entries, %.1f read units", n, db.queries, db.gets, db.entries, db.units)
}
