package fleetconfig

import "time"

// Bridge is a fleet's bridge capacity (docs/scaling.md, "Cold start"):
// stopped (or hibernated) instances of its On-Demand group, kept in an EC2
// Auto Scaling warm pool that takes them back on scale-in, started when
// work arrives that the running workers cannot take and stopped again once
// Spot instances are in service to take the work.
type Bridge struct {
	// Pool is how many stopped instances the warm pool keeps, and the most
	// bridge instances that run at once; 0 (the default) means no bridge.
	Pool int `yaml:"pool"`
	// State the pooled instances wait in: stopped (the default) or
	// hibernated (memory kept on the root volume; the launch template's
	// instances must be configured for hibernation, and EC2 hibernates no
	// accelerated-computing type: refused for GPU fleets).
	State string `yaml:"state"`
	// MaxMinutes bounds a bridge instance's life: past it the instance
	// takes no new job and is stopped once the jobs it runs end (default
	// 30, at most 1440).
	MaxMinutes int `yaml:"max_minutes"`
}

// DefaultBridgeMaxMinutes is a bridge instance's life when max_minutes is
// left out.
const DefaultBridgeMaxMinutes = 30

// Enabled reports whether the fleet has bridge capacity.
func (b Bridge) Enabled() bool { return b.Pool > 0 }

// PoolState is State or its default.
func (b Bridge) PoolState() string {
	if b.State == "" {
		return WarmPoolStopped
	}
	return b.State
}

// MaxLife is MaxMinutes or its default, as a duration.
func (b Bridge) MaxLife() time.Duration {
	if b.MaxMinutes <= 0 {
		return DefaultBridgeMaxMinutes * time.Minute
	}
	return time.Duration(b.MaxMinutes) * time.Minute
}

func (f *Fleet) validateBridge(at string, k *checker) {
	b := f.Bridge
	if b.Pool < 0 || b.Pool > f.MaxInstances {
		k.add(at+".bridge.pool", "must be between 0 (no bridge) and max_instances (%d), got %d", f.MaxInstances, b.Pool)
	}
	if st := b.State; st != "" && st != WarmPoolStopped && st != WarmPoolHibernated {
		k.add(at+".bridge.state", "must be %s or %s, got %q", WarmPoolStopped, WarmPoolHibernated, st)
	}
	if b.State == WarmPoolHibernated {
		for j, t := range f.InstanceTypes {
			if Accelerated(t) {
				k.add(at+".bridge.state", "hibernated is not possible with instance_types[%d] %s: EC2 does not hibernate accelerated-computing (GPU) instance types; use stopped", j, t)
				break
			}
		}
	}
	if b.MaxMinutes < 0 || b.MaxMinutes > 24*60 {
		k.add(at+".bridge.max_minutes", "must be between 1 and 1440 (0: the default %d), got %d", DefaultBridgeMaxMinutes, b.MaxMinutes)
	}
	if b.Pool > 0 && f.OnDemand.WarmPool.Size > 0 {
		k.add(at+".bridge", "and on_demand.warm_pool both put a warm pool on the On-Demand group; keep bridge.pool alone (it serves the On-Demand rung too)")
	}
}
