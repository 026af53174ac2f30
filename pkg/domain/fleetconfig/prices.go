package fleetconfig

import (
	"fmt"
	"sort"
)

// Prices are what the stage's instances cost, for the cost of each job
// (docs/scaling.md, "Cost per job"). Prices are the operator's figures: the
// On-Demand price from the AWS price list of the region; the Spot price is
// the fallback for when the scaler has no current Spot price of the type in
// the instance's zone from EC2's price history.
type Prices struct {
	// Overhead is the instance time spent booting and idle, as a fraction
	// of the time jobs hold leases; each job pays that share on top of its
	// own leased time. `fleetq simulate` shows a workload's figure.
	Overhead float64 `yaml:"overhead"`
	// InstanceTypes are the hourly prices of each instance type.
	InstanceTypes map[string]InstancePrice `yaml:"instance_types"`
}

// InstancePrice is one instance type's hourly price in dollars by purchase
// option; 0 means not known (a job on it is not priced).
type InstancePrice struct {
	OnDemand float64 `yaml:"on_demand"`
	Spot     float64 `yaml:"spot"`
}

func (c *Config) validatePrices(k *checker) {
	if o := c.Prices.Overhead; o < 0 || o > 10 {
		k.add("prices.overhead", "must be between 0 and 10 (a fraction of leased time), got %g", o)
	}
	types := make([]string, 0, len(c.Prices.InstanceTypes))
	for t := range c.Prices.InstanceTypes {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		p := c.Prices.InstanceTypes[t]
		at := fmt.Sprintf("prices.instance_types.%s", t)
		if !instancePattern.MatchString(t) {
			k.add(at, "%q is not an EC2 instance type (e.g. g5.xlarge)", t)
		}
		if p.OnDemand < 0 || p.OnDemand > 1000 {
			k.add(at+".on_demand", "must be between 0 and 1000 dollars an hour, got %g", p.OnDemand)
		}
		if p.Spot < 0 || p.Spot > 1000 {
			k.add(at+".spot", "must be between 0 and 1000 dollars an hour, got %g", p.Spot)
		}
	}
}
