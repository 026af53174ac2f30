package scaler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/asg"
)

// Groups is the fleets' Auto Scaling Groups as the scaler's capacity.
type Groups struct {
	Adapter *asg.Adapter
	// Names maps each fleet's slug to its group's name.
	Names map[string]string
	// OnDemandNames maps the slug of each fleet with an On-Demand rung to
	// its On-Demand group's name (FLEETQ_FLEET_ON_DEMAND_GROUPS).
	OnDemandNames map[string]string
	// Subnets are the subnets the fleets' groups are made with, each with
	// its zone (FLEETQ_SUBNETS): the zones a Spot group may launch in.
	// Empty: the scaler leaves the groups' subnets alone.
	Subnets []Subnet
}

// Subnet is a subnet of the fleets' groups and its availability zone.
type Subnet struct {
	ID   string `json:"subnet"`
	Zone string `json:"zone"`
}

var (
	_ Ladder  = Groups{}
	_ Weigher = Groups{}
	_ Pool    = Groups{}
)

// ParseSubnets reads FLEETQ_SUBNETS: a JSON list of {"subnet", "zone"}.
func ParseSubnets(s string) ([]Subnet, error) {
	var out []Subnet
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("subnets: want a JSON list of {\"subnet\": id, \"zone\": availability zone}: %w", err)
	}
	for i, sn := range out {
		if sn.ID == "" || sn.Zone == "" {
			return nil, fmt.Errorf("subnets: item %d needs both subnet and zone", i)
		}
	}
	return out, nil
}

// SpotZones answers the zones of Subnets, in order, once each.
func (g Groups) SpotZones(string) []string {
	var zones []string
	for _, sn := range g.Subnets {
		if !slices.Contains(zones, sn.Zone) {
			zones = append(zones, sn.Zone)
		}
	}
	return zones
}

// PlaceSpot sets the Spot group's instance type order (nil: unchanged) and
// its subnets to those of zones (nil: unchanged), with one
// UpdateAutoScalingGroup.
func (g Groups) PlaceSpot(ctx context.Context, fleet string, types, zones []string) error {
	name, err := g.name(fleet)
	if err != nil {
		return err
	}
	var subnets []string
	if zones != nil {
		subnets = []string{}
		for _, sn := range g.Subnets {
			if slices.Contains(zones, sn.Zone) {
				subnets = append(subnets, sn.ID)
			}
		}
	}
	return g.Adapter.Place(ctx, name, types, subnets)
}

// HasOnDemand reports whether the fleet has an On-Demand group.
func (g Groups) HasOnDemand(fleet string) bool { return g.OnDemandNames[fleet] != "" }

// DescribeOnDemand reads the fleet's On-Demand group as Describe reads the
// Spot group.
func (g Groups) DescribeOnDemand(ctx context.Context, fleet string) (Group, error) {
	name := g.OnDemandNames[fleet]
	if name == "" {
		return Group{}, fmt.Errorf("fleet %s has no On-Demand Auto Scaling Group", fleet)
	}
	return g.describe(ctx, name)
}

// SetOnDemandDesired sets the On-Demand group's desired capacity.
func (g Groups) SetOnDemandDesired(ctx context.Context, fleet string, n int) error {
	name := g.OnDemandNames[fleet]
	if name == "" {
		return fmt.Errorf("fleet %s has no On-Demand Auto Scaling Group", fleet)
	}
	return g.Adapter.SetDesired(ctx, name, n)
}

// StopIntoPool scales the On-Demand group in by one bridge instance, which
// its warm pool takes back stopped (asg.Adapter.StopIntoPool).
func (g Groups) StopIntoPool(ctx context.Context, fleet, instanceID string) error {
	name := g.OnDemandNames[fleet]
	if name == "" {
		return fmt.Errorf("fleet %s has no On-Demand Auto Scaling Group", fleet)
	}
	return g.Adapter.StopIntoPool(ctx, name, instanceID)
}

// SpotShortSince reads the Spot group's scaling activities (asg.ShortSince).
func (g Groups) SpotShortSince(ctx context.Context, fleet string) (time.Time, error) {
	name, err := g.name(fleet)
	if err != nil {
		return time.Time{}, err
	}
	return g.Adapter.ShortSince(ctx, name)
}

// ParseGroupNames reads the fleet → group map the CDK app passes in
// FLEETQ_FLEET_GROUPS (a JSON object of slug to group name).
func ParseGroupNames(s string) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("fleet groups: want a JSON object of fleet slug to Auto Scaling Group name: %w", err)
	}
	return m, nil
}

func (g Groups) name(fleet string) (string, error) {
	n, ok := g.Names[fleet]
	if !ok || n == "" {
		return "", fmt.Errorf("fleet %s has no Auto Scaling Group", fleet)
	}
	return n, nil
}

// Describe reads the group. Booting instances are the Pending states; those
// leaving (Terminating, Detaching, Standby, ...) are left out.
func (g Groups) Describe(ctx context.Context, fleet string) (Group, error) {
	name, err := g.name(fleet)
	if err != nil {
		return Group{}, err
	}
	return g.describe(ctx, name)
}

func (g Groups) describe(ctx context.Context, name string) (Group, error) {
	ag, err := g.Adapter.Describe(ctx, name)
	if err != nil {
		return Group{}, err
	}
	out := Group{Desired: ag.Desired, Types: ag.Types}
	for _, id := range ag.Subnets {
		if len(g.Subnets) == 0 {
			break // zones unknown: left alone
		}
		zone := ""
		for _, sn := range g.Subnets {
			if sn.ID == id {
				zone = sn.Zone
			}
		}
		if !slices.Contains(out.Zones, zone) {
			out.Zones = append(out.Zones, zone)
		}
	}
	for _, in := range ag.Instances {
		if in.InService() || in.Booting() {
			out.Instances = append(out.Instances, in)
		}
	}
	return out, nil
}

// SetDesired sets the group's desired capacity (cooldowns not honoured).
func (g Groups) SetDesired(ctx context.Context, fleet string, n int) error {
	name, err := g.name(fleet)
	if err != nil {
		return err
	}
	return g.Adapter.SetDesired(ctx, name, n)
}

// Terminate ends an instance, decrementing the desired capacity.
func (g Groups) Terminate(ctx context.Context, _ string, instanceID string) error {
	return g.Adapter.Terminate(ctx, instanceID)
}
