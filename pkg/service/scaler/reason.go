package scaler

import (
	"fmt"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// reasonParts are what a tick's one-line reason is made of: the policy's
// reason and what applying it and the rest of the tick added. The reason is
// built from them once (reason), and that one reason is both recorded with
// the decision and reported by the tick (FleetReport.Reason).
type reasonParts struct {
	// policy is the scaling policy's reason (scaling.Decision.Reason, or the
	// ladder's or the bridge's).
	policy scaling.Reason
	// advisory: no capacity is attached, so nothing was applied.
	advisory bool
	// kept counts victims that took work or could not be terminated.
	kept int
	// weighed is what weighing the Spot types and zones moved ("": nothing).
	weighed string
	// pool is the Spot pool's decision at the tick (zero: no pool).
	pool scaling.Reason
	// capHeld counts the ready jobs (of ready) tenant caps keep from
	// running now.
	capHeld, ready int
}

// reason is the tick's reason as recorded and reported: the policy's code,
// its line with the tick's parts.
func (p reasonParts) reason() scaling.Reason {
	r := p.policy
	if p.advisory {
		r = r.Advisory()
	}
	if p.kept > 0 {
		r = r.With(fmt.Sprintf("%d victim(s) kept: took work or could not be terminated", p.kept))
	}
	r = r.With(p.weighed)
	r = r.With(p.pool.String())
	if p.capHeld > 0 {
		r = r.With(fmt.Sprintf("tenant caps (max_leased) limit demand: %d of %d ready jobs cannot run now", p.capHeld, p.ready))
	}
	return r
}
