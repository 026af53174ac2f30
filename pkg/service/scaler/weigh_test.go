package scaler_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// weighHarness is the scaler on a Spot group of the fake Auto Scaling API
// (real SDK client) with three instance types and three zones, and the
// interruption counts of the store.
type weighHarness struct {
	*harness
	srv *localaws.AutoScaling
}

var weighSubnets = []scaler.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}, {ID: "subnet-b", Zone: "us-east-1b"}, {ID: "subnet-c", Zone: "us-east-1c"}}

func newWeighHarness(t *testing.T) *weighHarness {
	t.Helper()
	h := newHarness(t)
	h.sys.Store.Config().Fleets[0].InstanceTypes = []string{"g5.xlarge", "g5.2xlarge", "g6.xlarge"}
	srv, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	srv.SetClock(h.clock.Now)
	srv.PutGroup(localaws.ASGGroup{Name: spotGroup, Max: 5, NewInstancesProtected: true,
		InstanceTypes: []string{"g5.xlarge", "g5.2xlarge", "g6.xlarge"}, Subnets: []string{"subnet-a", "subnet-b", "subnet-c"}})
	ad := asg.New(autoscaling.NewFromConfig(localaws.Config(srv.URL), asg.WithoutSDKRetries), asg.Options{Sleep: func(context.Context, time.Duration) error { return nil }})
	h.configure(func(c *scaler.Config) {
		c.Capacity = scaler.Groups{Adapter: ad, Names: map[string]string{"gpu": spotGroup}, Subnets: weighSubnets}
	})
	h.configure(func(c *scaler.Config) { c.InterruptionCounts = h.sys.Store.InterruptionCounts })
	return &weighHarness{harness: h, srv: srv}
}

func (h *weighHarness) interrupt(n int, kind fleetstate.InterruptionKind, instanceType, zone string) {
	h.t.Helper()
	for range n {
		id := fmt.Sprintf("evt-%d", h.clock.Now().UnixNano())
		h.clock.Advance(time.Second)
		if _, err := h.sys.Store.RecordInterruption(h.ctx, fleetstate.Interruption{EventID: id, Fleet: "gpu", Kind: kind,
			InstanceType: instanceType, AZ: zone, At: h.clock.Now()}); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *weighHarness) placement() (types, subnets string) {
	g, _ := h.srv.Group(spotGroup)
	return strings.Join(g.InstanceTypes, ","), strings.Join(g.Subnets, ",")
}

// Interruptions move their instance type down the group's overrides and,
// at the threshold, take their zone out of its subnets; the decision says
// so. Once the window passes them by, the configured order and zones come
// back. Nothing is sent while nothing changes.
func TestWeighsDownInterruptedTypesAndZones(t *testing.T) {
	t.Parallel()
	h := newWeighHarness(t)
	r := h.tick()
	if r.Weighing == nil || r.Weighing.Placed || h.srv.CallCount("UpdateAutoScalingGroup") != 0 {
		t.Fatalf("no interruptions: weighing %+v, %d updates", r.Weighing, h.srv.CallCount("UpdateAutoScalingGroup"))
	}

	h.interrupt(3, fleetstate.InterruptSpot, "g5.xlarge", "us-east-1b")
	h.interrupt(1, fleetstate.InterruptSpot, "g5.xlarge", "us-east-1a")
	h.interrupt(5, fleetstate.InterruptRebalance, "g5.2xlarge", "us-east-1c") // not an interruption: ignored
	r = h.tick()
	types, subnets := h.placement()
	if types != "g5.2xlarge,g6.xlarge,g5.xlarge" || subnets != "subnet-a,subnet-c" || !r.Weighing.Placed {
		t.Fatalf("after interruptions: types %s, subnets %s, weighing %+v", types, subnets, r.Weighing)
	}
	want := "spot types: g5.xlarge last (4 interruptions in 1h); spot zones: without us-east-1b (3) (3 or more interruptions in 1h)"
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	d := st.LastDecision
	if d == nil || !strings.Contains(d.Reason.String(), want) {
		t.Fatalf("recorded reason %q, want it to contain %q", d.Reason, want)
	}
	if d.Inputs.Map()["spot_types_interrupted"] != 1 || d.Inputs.Map()["spot_zones"] != 2 || d.Inputs.Map()["spot_zones_dropped"] != 1 || d.Inputs.Map()["spot_placed"] != 1 {
		t.Fatalf("inputs %v", d.Inputs)
	}

	// The next tick sees the group as it left it: no second update.
	h.clock.Advance(time.Minute)
	r = h.tick()
	if n := h.srv.CallCount("UpdateAutoScalingGroup"); n != 1 || r.Weighing.Placed {
		t.Fatalf("%d updates after a tick with nothing new, placed %v", n, r.Weighing.Placed)
	}

	// Past the window: configured order and every zone again.
	h.clock.Advance(time.Hour)
	r = h.tick()
	types, subnets = h.placement()
	if types != "g5.xlarge,g5.2xlarge,g6.xlarge" || subnets != "subnet-a,subnet-b,subnet-c" || !r.Weighing.Placed || r.Weighing.Reason != "" {
		t.Fatalf("after the window: types %s, subnets %s, weighing %+v", types, subnets, r.Weighing)
	}
}

// Every zone past the threshold: the least interrupted zone stays.
func TestWeighNeverDropsEveryZone(t *testing.T) {
	t.Parallel()
	h := newWeighHarness(t)
	h.interrupt(4, fleetstate.InterruptSpot, "g6.xlarge", "us-east-1a")
	h.interrupt(3, fleetstate.InterruptSpot, "g6.xlarge", "us-east-1b")
	h.interrupt(5, fleetstate.InterruptSpot, "g6.xlarge", "us-east-1c")
	h.tick()
	if _, subnets := h.placement(); subnets != "subnet-b" {
		t.Fatalf("subnets %s, want subnet-b (the least interrupted)", subnets)
	}
}

// A failed update does not stop the tick: the decision is recorded, and
// the next tick tries again.
func TestWeighFailureIsNotFatal(t *testing.T) {
	t.Parallel()
	h := newWeighHarness(t)
	h.interrupt(1, fleetstate.InterruptSpot, "g5.xlarge", "us-east-1a")
	h.srv.FailNext("UpdateAutoScalingGroup", 1, localaws.ASGError{Status: 403, Code: "AccessDenied", Message: "not authorized"})
	r := h.tick()
	if r.Weighing == nil || r.Weighing.Placed {
		t.Fatalf("weighing %+v after a refused update", r.Weighing)
	}
	h.clock.Advance(time.Minute)
	h.tick()
	if types, _ := h.placement(); !slices.Equal(strings.Split(types, ","), []string{"g5.2xlarge", "g6.xlarge", "g5.xlarge"}) {
		t.Fatalf("types %s after the retry", types)
	}
}

// Auto Scaling keeps a group's subnets as a set and may answer them in
// another order than they were sent: the same zones in another order are
// no change, so no tick sends an update for them (one that AWS refused
// would otherwise be sent again every tick). The instance types' order is
// their priority: that order counts.
func TestZonesInAnotherOrderAreNoChange(t *testing.T) {
	t.Parallel()
	h := newWeighHarness(t)
	types := []string{"g5.xlarge", "g5.2xlarge", "g6.xlarge"}
	h.srv.PutGroup(localaws.ASGGroup{Name: spotGroup, Max: 5, NewInstancesProtected: true,
		InstanceTypes: types, Subnets: []string{"subnet-c", "subnet-a", "subnet-b"}})
	for range 3 {
		if r := h.tick(); r.Weighing == nil || r.Weighing.Placed {
			t.Fatalf("weighing %+v with the configured zones in another order", r.Weighing)
		}
		h.clock.Advance(time.Minute)
	}
	if n := h.srv.CallCount("UpdateAutoScalingGroup"); n != 0 {
		t.Fatalf("%d updates for the configured zones answered in another order, want 0", n)
	}

	// A zone taken out is one update; the zones left, answered in another
	// order, are none.
	h.interrupt(3, fleetstate.InterruptSpot, "g5.xlarge", "us-east-1b")
	if r := h.tick(); !r.Weighing.Placed || h.srv.CallCount("UpdateAutoScalingGroup") != 1 {
		t.Fatalf("weighing %+v, %d updates after a zone reached the threshold", r.Weighing, h.srv.CallCount("UpdateAutoScalingGroup"))
	}
	placed, subnets := h.placement()
	if subnets != "subnet-a,subnet-c" {
		t.Fatalf("subnets %s, want subnet-a,subnet-c", subnets)
	}
	h.srv.PutGroup(localaws.ASGGroup{Name: spotGroup, Max: 5, NewInstancesProtected: true,
		InstanceTypes: strings.Split(placed, ","), Subnets: []string{"subnet-c", "subnet-a"}})
	for range 3 {
		h.clock.Advance(time.Minute)
		if r := h.tick(); r.Weighing.Placed {
			t.Fatalf("weighing %+v with the zones left answered in another order", r.Weighing)
		}
	}
	if n := h.srv.CallCount("UpdateAutoScalingGroup"); n != 1 {
		t.Fatalf("%d updates, want the 1 that took the zone out", n)
	}

	// The types in another order than the weighing's are a change.
	h.srv.PutGroup(localaws.ASGGroup{Name: spotGroup, Max: 5, NewInstancesProtected: true,
		InstanceTypes: types, Subnets: []string{"subnet-c", "subnet-a"}})
	h.clock.Advance(time.Minute)
	if r := h.tick(); !r.Weighing.Placed || r.Weighing.SetZones != nil || r.Weighing.SetTypes == nil {
		t.Fatalf("weighing %+v: want the types sent and the zones left alone", r.Weighing)
	}
}
