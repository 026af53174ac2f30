package scaler

import (
	"context"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Group is a fleet's capacity as its group reports it. Instances leaving the
// group (terminating) are left out: each instance is in service or booting.
type Group struct {
	Desired   int
	Instances []scaling.Instance
	// Types are the instance types the group launches, in its priority
	// order, and Zones the availability zones of its subnets, when the
	// capacity tells them (a Weigher does).
	Types, Zones []string
}

// InService counts the instances in service.
func (g Group) InService() int {
	n := 0
	for _, i := range g.Instances {
		if !i.Booting() {
			n++
		}
	}
	return n
}

// Capacity is where a fleet's machines come from: an Auto Scaling Group in
// AWS (see ASG), a local fleet of in-process workers in the dev stack. The
// group never chooses a victim itself: instances are protected from its
// scale-in, and the scaler names each one it terminates.
type Capacity interface {
	Describe(ctx context.Context, fleet string) (Group, error)
	// SetDesired sets the group's desired capacity.
	SetDesired(ctx context.Context, fleet string, n int) error
	// Terminate ends one instance and lowers the desired capacity by one.
	Terminate(ctx context.Context, fleet, instanceID string) error
}

// Clock tells the time.
type Clock interface{ Now() time.Time }
