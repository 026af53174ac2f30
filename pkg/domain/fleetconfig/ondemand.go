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
	// WarmPool keeps stopped (or hibernated) instances of the On-Demand
	// group, booted once and ready to start, so an On-Demand launch skips
	// most of the boot (CDK app only; docs/deploy.md, "On-Demand warm
	// pool"). Off when its size is 0.
	WarmPool WarmPool `yaml:"warm_pool"`
}

// WarmPool is an EC2 Auto Scaling warm pool on a fleet's On-Demand group.
// A stopped instance bills its EBS volumes and Elastic IPs, not instance
// hours. Warm pools do not support Spot or mixed-instances groups, which is
// why the Spot group's warmth is fleetq's own (warm windows, forecast).
type WarmPool struct {
	// Size is the instances the pool keeps (its minimum size, and the
	// most it holds beyond the group's desired capacity).
	Size int `yaml:"size"`
	// State the pooled instances wait in: stopped (the default) or
	// hibernated (memory kept on the root volume; the launch template's
	// instances must be configured for hibernation).
	State string `yaml:"state"`
}

// Warm pool states.
const (
	WarmPoolStopped    = "stopped"
	WarmPoolHibernated = "hibernated"
)

// PoolState is State or its default.
func (w WarmPool) PoolState() string {
	if w.State == "" {
		return WarmPoolStopped
	}
	return w.State
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
	wp := f.OnDemand.WarmPool
	if wp.Size < 0 || wp.Size > f.MaxInstances {
		k.add(at+".on_demand.warm_pool.size", "must be between 0 and max_instances (%d), got %d", f.MaxInstances, wp.Size)
	} else if wp.Size > 0 && !f.OnDemand.Enabled() {
		k.add(at+".on_demand.warm_pool", "needs the On-Demand rung (set on_demand.fallback_after)")
	}
	if st := wp.State; st != "" && st != WarmPoolStopped && st != WarmPoolHibernated {
		k.add(at+".on_demand.warm_pool.state", "must be %s or %s, got %q", WarmPoolStopped, WarmPoolHibernated, st)
	}
}
