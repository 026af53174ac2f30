package localfleet

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// The bridge's warm pool, locally: a fleet listed in Options.Pool has an
// On-Demand group whose warm pool holds that many stopped instances, booted
// once (at the fleet's start here). The group draws on the pool first when
// its desired capacity rises: a pooled instance starts in Options.PoolStart
// of the boot delay and runs its worker again under its own id. Scaled in
// with StopIntoPool it stops (its worker ends, as on EC2) and goes back into
// the pool, as a group with ReuseOnScaleIn does.

var _ scaler.Pool = (*Fleet)(nil)

// fillPool puts the fleet's pool of stopped instances beside a new
// On-Demand group. The caller holds f.mu.
func (f *Fleet) fillPool(g *group) {
	for range f.o.Pool[g.fleet] {
		f.seq++
		g.pool = append(g.pool, fmt.Sprintf("i-local-%s-pool-%04d", g.fleet, f.seq))
	}
}

// poolStart is how long a pooled instance takes to start.
func (f *Fleet) poolStart() time.Duration {
	frac := f.o.PoolStart
	if frac <= 0 {
		frac = 0.25
	}
	return time.Duration(float64(f.o.BootDelay) * frac)
}

// StopIntoPool stops an instance of the fleet's On-Demand group and puts it
// back into the group's warm pool (terminated instead when the pool is
// full), lowering the group's desired capacity by one.
func (f *Fleet) StopIntoPool(_ context.Context, fleet, instanceID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, err := f.onDemandGroup(fleet)
	if err != nil {
		return err
	}
	in, ok := g.instances[instanceID]
	if !ok {
		return nil // already gone
	}
	if in.machine != nil && in.machine.Running() > 0 {
		f.stoppedBusy++
	}
	f.remove(g, in)
	g.desired = max(0, g.desired-1)
	if len(g.pool) < f.o.Pool[fleet] {
		g.pool = append(g.pool, in.id)
		f.stopped++
	} else {
		f.terminated++
	}
	return nil
}

// Pooled answers the stopped instances in the fleet's warm pool.
func (f *Fleet) Pooled(fleet string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, err := f.onDemandGroup(fleet)
	if err != nil {
		return nil
	}
	return append([]string(nil), g.pool...)
}
