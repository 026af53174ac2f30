package scaler

import (
	"context"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Pool is capacity whose On-Demand group keeps a warm pool that takes its
// instances back on scale-in (a fleet's bridge, docs/scaling.md "Cold
// start").
type Pool interface {
	// StopIntoPool scales the fleet's On-Demand group in by the named
	// instance, lowering its desired capacity by one: the instance goes
	// back into the warm pool stopped instead of being terminated.
	StopIntoPool(ctx context.Context, fleet, instanceID string) error
}

// useBridge reports whether a tick of the fleet is decided by the bridge:
// the fleet has one, and its On-Demand rung (if any) does not need the
// On-Demand group now (Spot short, or jobs pinned to On-Demand).
func useBridge(f *fleetconfig.Fleet, snap snapshot) bool {
	if !f.Bridge.Enabled() || snap.ladder == nil {
		return false
	}
	rungNeeds := !snap.ladder.spotShortSince.IsZero() || snap.backlog.OnDemandOnlyReady+snap.backlog.OnDemandOnlyLeased > 0
	return !(f.OnDemand.Enabled() && rungNeeds)
}

// tickBridge decides with scaling.DecideBridge over the Spot group and the
// bridge instances of the On-Demand group, and applies the decision: idle
// bridges stopped back into the pool and other victims terminated (each
// claimed idle first, as apply does), busy bridges past their life
// drained, then each group's desired capacity set.
func (s *Scaler) tickBridge(ctx context.Context, f *fleetconfig.Fleet, snap snapshot, p *decisionPlan, r *FleetReport) (scaling.Reason, error) {
	lad := snap.ladder
	bridges := p.addOnDemand(snap)
	d := scaling.DecideBridge(scaling.BridgeInput{Input: p.input, Bridges: bridges,
		SpotDesired: snap.group.Desired, BridgeDesired: lad.onDemand.Desired})
	r.Decision = d.Decision
	rep := &LadderReport{Rung: scaling.RungSpot, OnDemand: lad.onDemand, bridge: true,
		BridgeStart: d.Start, Bridges: d.Bridges, BridgeLeased: d.BridgeLeased}
	r.Ladder = rep

	gone, err := s.retire(ctx, f, *p, d.Victims, r)
	if err != nil {
		return scaling.Reason{}, err
	}
	goneSpot, goneOD := countByGroup(gone, bridges)
	keptSpot, keptOD := countByGroup(r.Kept, bridges)
	if rep.Drained, err = s.drainInstances(ctx, snap, d.Drain, "bridge"); err != nil {
		return scaling.Reason{}, err
	}
	rep.SpotDesired = min(d.SpotDesired+keptSpot, f.MaxInstances)
	rep.OnDemandDesired = d.BridgeDesired + keptOD
	if err := s.setGroups(ctx, f, rep, snap.group.Desired-goneSpot, lad.onDemand.Desired-goneOD); err != nil {
		return scaling.Reason{}, err
	}
	r.Desired = rep.SpotDesired + rep.OnDemandDesired
	return d.Reason, nil
}

// end takes a victim out of its group: an idle bridge back into its pool
// stopped (capacity with a Pool), anything else terminated.
func (s *Scaler) end(ctx context.Context, f *fleetconfig.Fleet, v scaling.Victim) error {
	if pool, ok := s.c.Capacity.(Pool); ok && v.Why == scaling.WhyBridge {
		return pool.StopIntoPool(ctx, f.Slug, v.InstanceID)
	}
	return s.c.Capacity.Terminate(ctx, f.Slug, v.InstanceID)
}
