package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// poolConfig is testConfig with a Spot pool for fleet other.
const poolConfig = testConfig + `    max_instances: 4
    spot_pool:
      size: 3
      pairs:
        - {instance_type: g5.xlarge, zone: us-east-1a}
        - {instance_type: g5.xlarge, zone: us-east-1b}
        - {instance_type: g5.xlarge, zone: us-east-1c}
`

func newPoolEnv(t *testing.T) *env {
	t.Helper()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(poolConfig))
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, cfg)
}

func (e *env) addPool(fleet, id, typ, zone string, state scaling.PoolState) {
	e.t.Helper()
	p := scaling.PoolInstance{ID: id, Pair: scaling.Pair{InstanceType: typ, Zone: zone}, State: state}
	if err := e.st.AddPoolInstance(e.ctx, fleet, p); err != nil {
		e.t.Fatalf("AddPoolInstance(%s): %v", id, err)
	}
}

func (e *env) poolState(fleet, id string) scaling.PoolInstance {
	e.t.Helper()
	p, found, err := e.st.PoolInstanceOf(e.ctx, fleet, id)
	if err != nil || !found {
		e.t.Fatalf("PoolInstanceOf(%s) = found %v, %v", id, found, err)
	}
	return p
}

// A pool instance's life: prepared, stopped, started for two jobs,
// running, stopped back; each move written only from the states it may
// come from, and the fleet's pool read with one Query.
func TestPoolInstanceLifecycle(t *testing.T) {
	t.Parallel()
	e := newPoolEnv(t)
	e.addPool("gpu", "i-a", "g5.xlarge", "us-east-1a", "")
	again := scaling.PoolInstance{ID: "i-a", Pair: scaling.Pair{InstanceType: "g6.xlarge", Zone: "us-east-1b"}}
	if err := e.st.AddPoolInstance(e.ctx, "gpu", again); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("adding i-a twice: %v, want ErrConflict", err)
	}
	if p := e.poolState("gpu", "i-a"); p.State != store.PoolPreparing || p.Pair.InstanceType != "g5.xlarge" || !p.Created.Equal(t0) || !p.Since.Equal(t0) {
		t.Fatalf("new pool instance: %+v", p)
	}
	move := func(to scaling.PoolState, startFor int) error {
		e.clock.Advance(time.Minute)
		return e.st.MovePoolInstance(e.ctx, "gpu", "i-a", to, e.clock.Now(), startFor)
	}
	// Not stopped yet: neither started nor stopped.
	for _, to := range []scaling.PoolState{store.PoolStarting, store.PoolStopping, store.PoolRunning} {
		if err := move(to, 1); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("preparing → %s: %v, want ErrConflict", to, err)
		}
	}
	for _, step := range []struct {
		to       scaling.PoolState
		startFor int
		want     int
	}{{store.PoolStopped, 0, 0}, {store.PoolStarting, 2, 2}, {store.PoolRunning, 0, 2}, {store.PoolStopping, 0, 0}, {store.PoolStopped, 0, 0}} {
		if err := move(step.to, step.startFor); err != nil {
			t.Fatalf("→ %s: %v", step.to, err)
		}
		if p := e.poolState("gpu", "i-a"); p.State != step.to || !p.Since.Equal(e.clock.Now()) || p.StartFor != step.want {
			t.Fatalf("after → %s: %+v, want start_for %d", step.to, p, step.want)
		}
	}
	if err := move(store.PoolStopping, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stopping a stopped instance: %v, want ErrConflict", err)
	}
	if err := e.st.MovePoolInstance(e.ctx, "gpu", "i-none", store.PoolStarting, e.clock.Now(), 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("starting an instance not recorded: %v, want ErrConflict", err)
	}
	if err := e.st.MovePoolInstance(e.ctx, "gpu", "i-a", store.PoolGone, e.clock.Now(), 0); err == nil {
		t.Fatal("a move to gone: want an error (EndPoolInstance ends one)")
	}

	e.addPool("gpu", "i-b", "g6.xlarge", "us-east-1b", store.PoolStopped)
	e.addPool("other", "i-c", "g5.xlarge", "us-east-1a", store.PoolStopped)
	until := e.clock.Now().Add(15 * time.Minute)
	g6b := scaling.Pair{InstanceType: "g6.xlarge", Zone: "us-east-1b"}
	if err := e.st.AvoidPoolPair(e.ctx, "gpu", g6b, until); err != nil {
		t.Fatal(err)
	}
	if err := e.st.AvoidPoolPair(e.ctx, "gpu", scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1c"}, e.clock.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	pool, avoided, err := e.st.ReadPool(e.ctx, "gpu")
	if err != nil || len(pool) != 2 || pool[0].ID != "i-a" || pool[1].ID != "i-b" || pool[1].State != store.PoolStopped {
		t.Fatalf("ReadPool(gpu) = %+v, %v; want i-a and i-b", pool, err)
	}
	if len(avoided) != 1 || !avoided[g6b].Equal(until) {
		t.Fatalf("avoided pairs %v; want g6.xlarge/us-east-1b until %s only (the other has lapsed)", avoided, until)
	}
	if fleet, got, found, err := e.st.FindPoolInstance(e.ctx, "i-c"); err != nil || !found || fleet != "other" || got.ID != "i-c" {
		t.Fatalf("FindPoolInstance(i-c) = %s %+v %v %v", fleet, got, found, err)
	}
	if _, _, found, err := e.st.FindPoolInstance(e.ctx, "i-none"); err != nil || found {
		t.Fatalf("FindPoolInstance(i-none) = %v %v", found, err)
	}
	// A fleet without a pool is not asked.
	e.addPool("gpu", "i-d", "g5.xlarge", "us-east-1a", store.PoolStopped)
	if _, _, found, err := e.st.FindPoolInstance(e.ctx, "i-d"); err != nil || found {
		t.Fatalf("FindPoolInstance(i-d) of fleet gpu, which has no spot_pool = %v %v", found, err)
	}
	// Ended only in the state its caller read: not once a start claimed it.
	if err := e.st.EndPoolInstance(e.ctx, "gpu", "i-a", store.PoolStopped); err != nil {
		t.Fatal(err)
	}
	if err := e.st.EndPoolInstance(e.ctx, "gpu", "i-a", store.PoolStopped); err != nil {
		t.Fatalf("ending twice: %v", err)
	}
	if err := e.st.MovePoolInstance(e.ctx, "gpu", "i-b", store.PoolStarting, e.clock.Now(), 1); err != nil {
		t.Fatal(err)
	}
	if err := e.st.EndPoolInstance(e.ctx, "gpu", "i-b", store.PoolStopped); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ending an instance read stopped that a start claimed since: %v, want ErrConflict", err)
	}
}

// Two wakes that both chose the same stopped instance: exactly one
// claims its start.
func TestPoolStartIsClaimedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.addPool("gpu", "i-a", "g5.xlarge", "us-east-1a", store.PoolStopped)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.st.MovePoolInstance(e.ctx, "gpu", "i-a", store.PoolStarting, e.clock.Now(), i+1)
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
			if p := e.poolState("gpu", "i-a"); p.StartFor != i+1 {
				t.Fatalf("the winner's start_for: %+v, want %d", p, i+1)
			}
		case !errors.Is(err, store.ErrConflict):
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d claims won, want 1", won)
	}
}

// EC2 stopped a running pool instance on interruption: it is marked
// interrupted, no start claims it, and only EC2 bringing it back makes it
// run again.
func TestPoolInterruptedIsNeverClaimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.addPool("gpu", "i-a", "g5.xlarge", "us-east-1a", store.PoolRunning)
	if err := e.st.MovePoolInstance(e.ctx, "gpu", "i-a", store.PoolInterrupted, e.clock.Now(), 0); err != nil {
		t.Fatal(err)
	}
	for _, to := range []scaling.PoolState{store.PoolStarting, store.PoolStopping} {
		if err := e.st.MovePoolInstance(e.ctx, "gpu", "i-a", to, e.clock.Now(), 1); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("interrupted → %s: %v, want ErrConflict", to, err)
		}
	}
	if err := e.st.MovePoolInstance(e.ctx, "gpu", "i-a", store.PoolRunning, e.clock.Now(), 0); err != nil {
		t.Fatalf("brought back by EC2: %v", err)
	}
}
