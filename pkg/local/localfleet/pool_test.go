package localfleet

import (
	"context"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// A fleet with a pool has an On-Demand group that starts its stopped
// instances in a fraction of the boot, launches fresh ones only when the
// pool is empty, and takes instances back stopped on StopIntoPool.
func TestPoolStartsAndTakesBackStoppedInstances(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	machines := map[string]*fakeMachine{}
	f := New(ctx, Options{
		Clock: clk, BootDelay: 40 * time.Second, PoolStart: 0.25, Pool: map[string]int{"gpu": 2},
		Launch: func(_ context.Context, _, id string) Machine {
			m := &fakeMachine{}
			machines[id] = m
			return m
		},
	})
	if !f.HasOnDemand("gpu") || f.HasOnDemand("other") {
		t.Fatal("a pool gives its fleet an On-Demand group, and only its fleet")
	}
	pool := f.Pooled("gpu")
	if len(pool) != 2 {
		t.Fatalf("pool %v, want 2 stopped instances", pool)
	}
	if err := f.SetOnDemandDesired(ctx, "gpu", 3); err != nil {
		t.Fatal(err)
	}
	if p := f.Pooled("gpu"); len(p) != 0 {
		t.Fatalf("pool %v after starting 3 with 2 pooled", p)
	}
	clk.Advance(10 * time.Second)
	f.Step(ctx, 10*time.Second)
	if len(machines) != 2 || machines[pool[0]] == nil || machines[pool[1]] == nil {
		t.Fatalf("after a quarter of the boot: machines %v, want the two pooled instances running", machines)
	}
	clk.Advance(30 * time.Second)
	f.Step(ctx, 30*time.Second)
	if len(machines) != 3 {
		t.Fatalf("after the boot: %d machines, want the fresh one too", len(machines))
	}
	if st := f.Stats(); st.Started != 2 || st.Launched != 1 {
		t.Fatalf("stats %+v", st)
	}
	machines[pool[1]].running = 1
	for _, id := range []string{pool[0], pool[1]} {
		if err := f.StopIntoPool(ctx, "gpu", id); err != nil {
			t.Fatal(err)
		}
	}
	od, _ := f.DescribeOnDemand(ctx, "gpu")
	if od.Desired != 1 || len(od.Instances) != 1 || !machines[pool[0]].stopped {
		t.Fatalf("On-Demand group %+v after two stops", od)
	}
	if p := f.Pooled("gpu"); len(p) != 2 {
		t.Fatalf("pool %v, want both back", p)
	}
	if st := f.Stats(); st.Stopped != 2 || st.StoppedBusy != 1 {
		t.Fatalf("stats %+v: a busy instance stopped must be counted", st)
	}
}
