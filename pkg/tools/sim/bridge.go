package sim

import (
	"time"

	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// Start delays of a bridge instance, from the group's scale-out to a
// registered worker. EC2 starts a stopped instance in about 21 s and
// resumes a hibernated one in about 21 s (published measurements on
// general-purpose instances, January 2026); on top of that:
//   - stopped: the operating system boots again (10–20 s; the root volume
//     is already hydrated, unlike a fresh launch's, whose blocks load
//     from its snapshot on first read), then the agent starts and the
//     runner becomes ready (5–25 s; the image, drivers and packages are
//     on the volume from the instance's first boot);
//   - hibernated: memory comes back, the runner is already running, and
//     the agent only re-checks it and the GPU (3–10 s);
//
// plus 2–5 s for the group to act on the new desired capacity.
var (
	DefaultStoppedStart    = [2]time.Duration{38 * time.Second, 71 * time.Second}
	DefaultHibernatedStart = [2]time.Duration{26 * time.Second, 36 * time.Second}
)

// DefaultEBSPrice is gp3's price in us-east-1, dollars per GB-month, as
// AWS's EBS pricing page lists it.
const DefaultEBSPrice = cost.GP3PricePerGBMonth

// bridger is a policy with bridge capacity: the size of its warm pool.
type bridger interface{ bridgePool() int }

func (o *Options) bridgeDefaults() {
	if f := o.Fleet; f != nil {
		if o.Bridge == 0 {
			o.Bridge = f.Bridge.Pool
		}
		if o.BridgeState == "" {
			o.BridgeState = f.Bridge.State
		}
		if o.BridgeMaxLife <= 0 && f.Bridge.MaxMinutes > 0 {
			o.BridgeMaxLife = f.Bridge.MaxLife()
		}
		if o.BridgeVolumeGB <= 0 {
			o.BridgeVolumeGB = f.RootVolumeGB
		}
	}
	if o.BridgeState == "" {
		o.BridgeState = fleetconfig.WarmPoolStopped
	}
	if o.BridgeMaxLife <= 0 {
		o.BridgeMaxLife = fleetconfig.DefaultBridgeMaxMinutes * time.Minute
	}
	if o.BridgeStartMin <= 0 {
		d := DefaultStoppedStart
		if o.BridgeState == fleetconfig.WarmPoolHibernated {
			d = DefaultHibernatedStart
		}
		o.BridgeStartMin, o.BridgeStartMax = d[0], d[1]
	}
	if o.BridgeStartMax < o.BridgeStartMin {
		o.BridgeStartMax = o.BridgeStartMin
	}
	if o.BridgeVolumeGB <= 0 {
		o.BridgeVolumeGB = 100
	}
	if o.EBSPricePerGBMonth <= 0 {
		o.EBSPricePerGBMonth = DefaultEBSPrice
	}
}

// bridgeStop is how long a scaled-in bridge instance takes to be stopped
// (or hibernated, which first writes memory to the volume) and startable
// again.
func (o *Options) bridgeStop() time.Duration {
	if o.BridgeState == fleetconfig.WarmPoolHibernated {
		return 2 * time.Minute
	}
	return time.Minute
}
