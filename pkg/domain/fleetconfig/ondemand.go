package fleetconfig

import "time"

// OnDemand is a fleet's On-Demand rung: a second group beside the Spot
// group, on the same launch template, that takes the fleet's launches when
// Spot capacity is short (docs/scaling.md, "Fallback ladder").
type OnDemand struct {
	// FallbackAfter is how long Spot launches may fail for lack of capacity
	// before launches move to On-Demand; zero (the default) means the fleet
	// has no On-Demand rung and waits for Spot.
	FallbackAfter Duration `yaml:"fallback_after"`
	// WaitSLO moves launches to On-Demand before FallbackAfter: once Spot
	// launches fail for lack of capacity at all and the oldest ready job
	// has waited longer than it. Zero (the default) leaves the move to
	// FallbackAfter alone.
	WaitSLO Duration `yaml:"wait_slo"`
	// PricePerHour is the On-Demand price of one instance-hour, in dollars,
	// for cost reports (optional).
	PricePerHour float64 `yaml:"price_per_hour"`
}

// Enabled reports whether the fleet has an On-Demand rung.
func (o OnDemand) Enabled() bool { return o.FallbackAfter > 0 }

func (f *Fleet) validateOnDemand(at string, k *checker) {
	if d := f.OnDemand.FallbackAfter.Std(); d < 0 || d > 24*time.Hour {
		k.add(at+".on_demand.fallback_after", "must be between 0s (no On-Demand rung) and 24h, got %s", f.OnDemand.FallbackAfter)
	}
	if d := f.OnDemand.WaitSLO.Std(); d < 0 || d > 24*time.Hour {
		k.add(at+".on_demand.wait_slo", "must be between 0s (none) and 24h, got %s", f.OnDemand.WaitSLO)
	}
	if f.OnDemand.WaitSLO > 0 && !f.OnDemand.Enabled() {
		k.add(at+".on_demand.wait_slo", "needs on_demand.fallback_after: without an On-Demand rung there is nowhere to move launches")
	}
	if p := f.OnDemand.PricePerHour; p < 0 || p > 1000 {
		k.add(at+".on_demand.price_per_hour", "must be between 0 and 1000 dollars, got %g", p)
	}
}
