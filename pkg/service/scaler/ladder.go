package scaler

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// Ladder is capacity with an On-Demand group beside a fleet's Spot group
// (the fallback ladder, docs/scaling.md). Capacity that does not implement
// it keeps every fleet on its one group.
type Ladder interface {
	// HasOnDemand reports whether the fleet has an On-Demand group.
	HasOnDemand(fleet string) bool
	// DescribeOnDemand reads the fleet's On-Demand group as Describe reads
	// the Spot group.
	DescribeOnDemand(ctx context.Context, fleet string) (Group, error)
	// SetOnDemandDesired sets the On-Demand group's desired capacity.
	SetOnDemandDesired(ctx context.Context, fleet string, n int) error
	// SpotShortSince answers since when the Spot group's launches have
	// been failing for lack of capacity; zero while they do not.
	SpotShortSince(ctx context.Context, fleet string) (time.Time, error)
}

// LadderReport is what a tick of a fleet with an On-Demand rung saw and did.
type LadderReport struct {
	// Rung is where new capacity went: scaling.RungSpot or RungOnDemand.
	Rung string
	// SpotShortSince is when the Spot group's launches began failing for
	// lack of capacity (zero while they do not, or while the Spot group
	// has no launch outstanding).
	SpotShortSince time.Time
	// OnDemand is the On-Demand group as read; Group in the report is the
	// Spot group.
	OnDemand Group
	// SpotDesired and OnDemandDesired are the desired capacities the tick
	// left on each group.
	SpotDesired, OnDemandDesired int
	// Drained are the busy On-Demand workers' instances told to take no new
	// work once Spot was back, or (with a bridge) past their life.
	Drained []string
	// BridgeStart, Bridges and BridgeLeased are, for a tick decided by the
	// fleet's bridge, the bridges it started, those running or starting
	// after it, and the jobs they held.
	BridgeStart, Bridges, BridgeLeased int

	shortFor time.Duration
	bridge   bool
}

// inputs are the rung's part of the decision's inputs.
func (l *LadderReport) inputs() *fleetstate.LadderInputs {
	in := &fleetstate.LadderInputs{OnDemandRung: l.Rung == scaling.RungOnDemand,
		SpotShortSeconds: int(l.shortFor / time.Second), SpotDesired: l.SpotDesired, OnDemandDesired: l.OnDemandDesired,
		OnDemandInstances: len(l.OnDemand.Instances), DrainedOnDemand: len(l.Drained)}
	if l.bridge {
		in.Bridge = &fleetstate.LadderBridgeInputs{Start: l.BridgeStart, Bridges: l.Bridges, Leased: l.BridgeLeased}
	}
	return in
}

// ladderSnapshot is the On-Demand side of a fleet's snapshot.
type ladderSnapshot struct {
	onDemand       Group
	spotShortSince time.Time
}

// readLadder reads the On-Demand group and the Spot shortage of a fleet
// whose config turns the rung on and whose capacity has the group; nil
// otherwise (the fleet keeps its one group). A shortage counts only while
// the Spot group has a launch outstanding: failures left from a scale-out
// the fleet no longer wants say nothing about the next one.
func (s *Scaler) readLadder(ctx context.Context, f *fleetconfig.Fleet, spot Group) (*ladderSnapshot, error) {
	l, ok := s.c.Capacity.(Ladder)
	if !(f.OnDemand.Enabled() || f.Bridge.Enabled()) || !ok || !l.HasOnDemand(f.Slug) {
		return nil, nil
	}
	od, err := l.DescribeOnDemand(ctx, f.Slug)
	if err != nil {
		return nil, err
	}
	snap := &ladderSnapshot{onDemand: od}
	if f.OnDemand.Enabled() && spot.Desired > len(spot.Instances) {
		if snap.spotShortSince, err = l.SpotShortSince(ctx, f.Slug); err != nil {
			return nil, err
		}
	}
	return snap, nil
}

// tickLadder decides with scaling.DecideLadder over both groups and
// applies the decision: victims retired as apply does (each from its own
// group), busy On-Demand workers drained once Spot is back, then each
// group's desired capacity set.
func (s *Scaler) tickLadder(ctx context.Context, f *fleetconfig.Fleet, snap snapshot, p *decisionPlan, r *FleetReport) (scaling.Reason, error) {
	lad := snap.ladder
	onDemand := p.addOnDemand(snap)
	in := scaling.LadderInput{
		Input: p.input, OnDemand: onDemand,
		SpotDesired: snap.group.Desired, OnDemandDesired: lad.onDemand.Desired,
		SpotShortSince: lad.spotShortSince, After: f.OnDemand.FallbackAfter.Std(),
		WaitSLO: f.OnDemand.WaitSLO.Std(), OldestReadyWait: oldestReadyWait(snap),
		OnDemandOnlyReady: snap.backlog.OnDemandOnlyReady, OnDemandOnlyLeased: snap.backlog.OnDemandOnlyLeased,
	}
	d := scaling.DecideLadder(in)
	r.Decision = d.Decision
	rep := &LadderReport{Rung: d.Rung, SpotShortSince: lad.spotShortSince, OnDemand: lad.onDemand}
	if !lad.spotShortSince.IsZero() {
		rep.shortFor = snap.now.Sub(lad.spotShortSince)
	}
	r.Ladder = rep

	gone, err := s.retire(ctx, f, *p, d.Victims, r)
	if err != nil {
		return scaling.Reason{}, err
	}
	goneSpot, goneOD := countByGroup(gone, onDemand)
	keptSpot, keptOD := countByGroup(r.Kept, onDemand)
	if rep.Drained, err = s.drainInstances(ctx, snap, d.Drain, "On-Demand"); err != nil {
		return scaling.Reason{}, err
	}
	rep.SpotDesired = min(d.SpotDesired+keptSpot, f.MaxInstances)
	rep.OnDemandDesired = min(d.OnDemandDesired+keptOD, f.MaxInstances)
	if err := s.setGroups(ctx, f, rep, snap.group.Desired-goneSpot, lad.onDemand.Desired-goneOD); err != nil {
		return scaling.Reason{}, err
	}
	r.Desired = rep.SpotDesired + rep.OnDemandDesired
	return d.Reason, nil
}

// countByGroup counts instance ids in the Spot group and in the On-Demand
// group (those inOnDemand names).
func countByGroup(ids []string, inOnDemand map[string]bool) (spot, onDemand int) {
	for _, id := range ids {
		if inOnDemand[id] {
			onDemand++
		} else {
			spot++
		}
	}
	return spot, onDemand
}

// drainInstances drains the active workers of the named instances and
// answers the instances drained; what names them in an error.
func (s *Scaler) drainInstances(ctx context.Context, snap snapshot, ids []string, what string) ([]string, error) {
	workers := map[string]string{}
	for _, w := range snap.workers {
		if w.Status == worker.Active {
			workers[w.InstanceID] = w.ID
		}
	}
	var drained []string
	for _, id := range ids {
		if wid, ok := workers[id]; ok {
			if _, err := s.store.DrainWorker(ctx, wid); err != nil {
				return drained, fmt.Errorf("drain %s worker %s: %w", what, wid, err)
			}
			drained = append(drained, id)
		}
	}
	return drained, nil
}

// setGroups sets each group's desired capacity to the report's where it
// differs from what the group holds now.
func (s *Scaler) setGroups(ctx context.Context, f *fleetconfig.Fleet, rep *LadderReport, spotNow, onDemandNow int) error {
	if rep.OnDemandDesired != onDemandNow {
		if err := s.c.Capacity.(Ladder).SetOnDemandDesired(ctx, f.Slug, rep.OnDemandDesired); err != nil {
			return err
		}
	}
	if rep.SpotDesired != spotNow {
		return s.c.Capacity.SetDesired(ctx, f.Slug, rep.SpotDesired)
	}
	return nil
}

// oldestReadyWait is how long the fleet's oldest ready job has waited
// (zero with none ready).
func oldestReadyWait(snap snapshot) time.Duration {
	if snap.backlog.OldestReady.IsZero() || snap.backlog.Ready == 0 {
		return 0
	}
	return max(0, snap.now.Sub(snap.backlog.OldestReady))
}

// addOnDemand adds the On-Demand group's instances to the plan's input,
// each with the time the scaler first saw it, and answers their ids.
func (p *decisionPlan) addOnDemand(snap snapshot) map[string]bool {
	ids := map[string]bool{}
	for _, inst := range snap.ladder.onDemand.Instances {
		ids[inst.ID] = true
		seen, ok := snap.state.FirstSeen[inst.ID]
		if !ok {
			seen = snap.now
		}
		p.firstSeen[inst.ID] = seen
		inst.FirstSeen = seen
		p.input.Instances = append(p.input.Instances, inst)
	}
	return ids
}
