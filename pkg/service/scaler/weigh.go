package scaler

import (
	"context"
	"slices"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Weigher is capacity whose Spot groups' instance type order and zones the
// scaler can change (docs/scaling.md, "Weighing down interrupted types and
// zones"). Its Describe fills Group.Types and Group.Zones.
type Weigher interface {
	// SpotZones answers every zone the fleet's Spot group may launch in,
	// in order.
	SpotZones(fleet string) []string
	// PlaceSpot sets the Spot group's instance type priority order and the
	// zones it launches in; nil leaves either as it is.
	PlaceSpot(ctx context.Context, fleet string, types, zones []string) error
}

// WeighReport is what a tick did to steer a fleet's Spot group away from
// recently interrupted instance types and zones.
type WeighReport struct {
	scaling.Weighting
	// Interrupted counts the Spot interruptions in the window, by type.
	Interrupted map[string]int
	// Placed is set when the tick changed the group's order or zones.
	Placed bool
	// SetTypes and SetZones are what the tick sent (nil: left as they were).
	SetTypes, SetZones []string

	dropped int
}

// inputs are the weighing's part of the decision's inputs.
func (w *WeighReport) inputs() *fleetstate.WeighInputs {
	n := 0
	for _, c := range w.Interrupted {
		if c > 0 {
			n++
		}
	}
	return &fleetstate.WeighInputs{TypesInterrupted: n, Zones: len(w.Zones), ZonesDropped: w.dropped, Placed: w.Placed}
}

// weigh reads the Spot interruptions of the fleet's window, decides with
// scaling.WeighSpot, and when the instance type order or the zones differ
// from the group's, changes the group. Only fleets with more than one type
// or zone on capacity that is a Weigher are weighed; nil otherwise.
func (s *Scaler) weigh(ctx context.Context, f *fleetconfig.Fleet, snap snapshot) (*WeighReport, error) {
	w, ok := s.c.Capacity.(Weigher)
	if !ok || s.c.InterruptionCounts == nil {
		return nil, nil
	}
	zones := w.SpotZones(f.Slug)
	if len(f.InstanceTypes) < 2 && len(zones) < 2 {
		return nil, nil
	}
	window := f.Spot.InterruptionWindow.Std()
	counts, err := s.c.InterruptionCounts(ctx, f.Slug, snap.now.Add(-window))
	if err != nil {
		return nil, err
	}
	in := scaling.WeighInput{Types: f.InstanceTypes, Zones: zones, Interrupted: map[scaling.TypeZone]int{},
		Window: window, ZoneThreshold: f.Spot.ZoneInterruptions, Occupied: map[string]int{}}
	for _, inst := range snap.group.Instances {
		if inst.AZ != "" {
			in.Occupied[inst.AZ]++
		}
	}
	rep := &WeighReport{Interrupted: map[string]int{}}
	for _, c := range counts {
		if c.Kind == fleetstate.InterruptSpot {
			in.Interrupted[scaling.TypeZone{Type: c.InstanceType, Zone: c.AZ}] += c.Count
			rep.Interrupted[c.InstanceType] += c.Count
		}
	}
	rep.Weighting = scaling.WeighSpot(in)
	rep.dropped = len(zones) - len(rep.Zones)
	group := snap.group
	if len(f.InstanceTypes) > 1 && len(group.Types) > 0 && !slices.Equal(rep.Types, group.Types) {
		rep.SetTypes = rep.Types
	}
	// The types' order is their priority; the zones are a set (Auto
	// Scaling may answer a group's subnets in another order than sent).
	if len(zones) > 1 && !sameSet(rep.Zones, group.Zones) {
		rep.SetZones = rep.Zones
	}
	if rep.SetTypes == nil && rep.SetZones == nil {
		return rep, nil
	}
	if err := w.PlaceSpot(ctx, f.Slug, rep.SetTypes, rep.SetZones); err != nil {
		return rep, err
	}
	rep.Placed = true
	return rep, nil
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
