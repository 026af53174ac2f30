package asg_test

import (
	"context"
	"slices"
	"testing"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// Scaling one named instance into a reusing warm pool: the group, which
// chooses its own scale-in victims among unprotected instances, takes
// exactly that one, even when another (busy) instance came back from the
// pool unprotected; the others stay, and the pool holds it stopped.
func TestStopIntoPoolTakesExactlyTheNamedInstance(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(localaws.ASGGroup{Name: "od", Max: 4, Desired: 3, Launches: true, NewInstancesProtected: true,
		WarmPool: &localaws.ASGWarmPool{ReuseOnScaleIn: true},
		Instances: []localaws.ASGInstance{
			{ID: "i-busy", LifecycleState: "InService"}, // unprotected, as if back from the pool
			{ID: "i-idle", LifecycleState: "InService", ProtectedFromScaleIn: true},
			{ID: "i-other", LifecycleState: "InService", ProtectedFromScaleIn: true},
		}})
	if err := h.ad.StopIntoPool(ctx, "od", "i-idle"); err != nil {
		t.Fatal(err)
	}
	g, ok := h.fake.Group("od")
	if !ok || g.Desired != 2 {
		t.Fatalf("group %+v, want desired 2", g)
	}
	var ids []string
	for _, in := range g.Instances {
		ids = append(ids, in.ID)
	}
	if !slices.Equal(ids, []string{"i-busy", "i-other"}) {
		t.Fatalf("instances %v: want i-idle gone, the rest kept", ids)
	}
	if wp := h.fake.WarmPool("od"); wp == nil || !slices.Equal(wp.Stopped, []string{"i-idle"}) {
		t.Fatalf("warm pool %+v, want i-idle stopped in it", wp)
	}
	// Raising the group again starts the pooled instance, not a new one.
	if err := h.ad.SetDesired(ctx, "od", 3); err != nil {
		t.Fatal(err)
	}
	if g, _ := h.fake.Group("od"); !slices.ContainsFunc(g.Instances, func(in localaws.ASGInstance) bool { return in.ID == "i-idle" }) {
		t.Fatalf("instances %+v: want i-idle started from the pool", g.Instances)
	}
	// An instance already gone is done.
	if err := h.ad.StopIntoPool(ctx, "od", "i-gone"); err != nil {
		t.Fatal(err)
	}
	if n := h.fake.CallCount("SetDesiredCapacity"); n != 2 {
		t.Fatalf("%d SetDesiredCapacity calls, want 2", n)
	}
}
