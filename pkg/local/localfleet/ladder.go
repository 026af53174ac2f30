package localfleet

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// The fallback ladder, locally: a fleet listed in Options.OnDemand has an
// On-Demand group beside its Spot group, as the CDK app builds one
// (docs/scaling.md, "Fallback ladder"). SetSpotShort makes the Spot group's
// launches fail for lack of capacity, as a Spot pool running dry does: the
// group keeps its desired capacity and launches nothing, and SpotShortSince
// answers since when its launches have failed (what the scaler reads from
// a real group's scaling activities).

var _ scaler.Ladder = (*Fleet)(nil)

func onDemandKey(fleet string) string { return fleet + "/on-demand" }

// onDemandGroup is the fleet's On-Demand group. The caller holds f.mu.
func (f *Fleet) onDemandGroup(fleet string) (*group, error) {
	if !f.HasOnDemand(fleet) {
		return nil, fmt.Errorf("fleet %s has no On-Demand group", fleet)
	}
	key := onDemandKey(fleet)
	g, ok := f.groups[key]
	if !ok {
		g = f.group(key)
		g.fleet, g.onDemand = fleet, true
		f.fillPool(g)
	}
	return g, nil
}

// HasOnDemand reports whether the fleet has an On-Demand group: it has an
// On-Demand rung or a bridge pool.
func (f *Fleet) HasOnDemand(fleet string) bool { return f.o.OnDemand[fleet] || f.o.Pool[fleet] > 0 }

// DescribeOnDemand reports the fleet's On-Demand group.
func (f *Fleet) DescribeOnDemand(_ context.Context, fleet string) (scaler.Group, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, err := f.onDemandGroup(fleet)
	if err != nil {
		return scaler.Group{}, err
	}
	return f.describe(g), nil
}

// SetOnDemandDesired sets the On-Demand group's desired capacity.
func (f *Fleet) SetOnDemandDesired(_ context.Context, fleet string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, err := f.onDemandGroup(fleet)
	if err != nil {
		return err
	}
	return f.setDesired(g, n)
}

// SpotShortSince answers since when the fleet's Spot group has failed to
// launch for lack of capacity; zero while it launches (or wants nothing).
func (f *Fleet) SpotShortSince(_ context.Context, fleet string) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.group(fleet)
	f.reconcile(g)
	return g.shortSince, nil
}

// SetSpotShort turns a Spot capacity shortage of the fleet on or off. While
// it is on, the Spot group launches nothing; when it ends, the group's next
// step launches what its desired capacity asks for.
func (f *Fleet) SetSpotShort(fleet string, short bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.group(fleet)
	g.short = short
	f.reconcile(g)
}
