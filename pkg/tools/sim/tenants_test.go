package sim

import (
	"testing"
	"time"
)

// A tenant bursting at ten times the others' rate: oldest-first leasing
// makes the others wait behind the whole burst; fair share with a cap of 4
// leased jobs per tenant keeps every other tenant's p95 wait within 20% of
// what it is without the burst.
func goalFairShareShieldsTheOthersFromABurst(t *testing.T) {
	steadyW, _ := BuiltIn("tenants-steady", 1, 1)
	burstW, _ := BuiltIn("tenants", 1, 1)
	o := Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45}
	steady := Run(steadyW, NewFleetq(nil), o)
	fifo := Run(burstW, NewFleetq(nil), o)
	o.FairShare, o.TenantMaxLeased = true, 4
	fair := Run(burstW, NewFleetq(nil), o)
	if fair.Completed != fair.Jobs || fair.Killed != 0 {
		t.Fatalf("fair share: %d of %d done, %d killed", fair.Completed, fair.Jobs, fair.Killed)
	}
	worst := 0.0
	for _, tenant := range []string{"t1", "t2", "t3"} {
		base, f, q := steady.P95WaitByTenantS[tenant], fair.P95WaitByTenantS[tenant], fifo.P95WaitByTenantS[tenant]
		if base <= 0 {
			t.Fatalf("%s: no waits in the steady run", tenant)
		}
		if f > 1.2*base || f < 0.8*base {
			t.Errorf("%s: p95 wait %.0fs under fair share, %.0fs without the burst: more than 20%% apart", tenant, f, base)
		}
		worst = max(worst, q/base)
	}
	if worst < 2 {
		t.Errorf("oldest first: the others' p95 wait grew at most %.1f×; the scenario should show the burst starving them", worst)
	}
}

// With tenant caps fleetq sizes the fleet to the work the caps let run,
// not to a capped tenant's whole backlog.
func TestFleetqSizesToTheWorkTheCapsAllow(t *testing.T) {
	t.Parallel()
	o := Observation{Now: time.Minute, Queued: 40, Leased: 4, Slots: 1, MaxInstances: 50, Desired: 4, Capped: true, Runnable: 6}
	for i := range 4 {
		o.Instances = append(o.Instances, InstanceView{ID: i + 1, Registered: true, Busy: 1})
	}
	if a := NewFleetq(nil).Decide(Tick, o); a.Desired != 6 {
		t.Fatalf("desired %d, want 6: the runnable work, not 44", a.Desired)
	}
	o.Capped = false
	if a := NewFleetq(nil).Decide(Tick, o); a.Desired != 44 {
		t.Fatalf("uncapped: desired %d, want 44", a.Desired)
	}
}
