package scaler

import (
	"fmt"
	"strings"
)

// reasonParts are what a tick's one-line reason is made of: the policy's
// reason and what applying it and the rest of the tick added. The reason is
// built from them once (String), and that one string is both recorded with
// the decision and reported by the tick (FleetReport.Reason).
type reasonParts struct {
	// policy is the scaling policy's reason (scaling.Decision.Reason, or the
	// ladder's or the bridge's).
	policy string
	// advisory: no capacity is attached, so nothing was applied.
	advisory bool
	// kept counts victims that took work or could not be terminated.
	kept int
	// weighed is what weighing the Spot types and zones moved ("": nothing).
	weighed string
	// capHeld counts the ready jobs (of ready) tenant caps keep from
	// running now.
	capHeld, ready int
}

// String is the reason as recorded and reported.
func (p reasonParts) String() string {
	var b strings.Builder
	if p.advisory {
		b.WriteString("advisory, no capacity attached: ")
	}
	b.WriteString(p.policy)
	if p.kept > 0 {
		fmt.Fprintf(&b, "; %d victim(s) kept: took work or could not be terminated", p.kept)
	}
	if p.weighed != "" {
		b.WriteString("; " + p.weighed)
	}
	if p.capHeld > 0 {
		fmt.Fprintf(&b, "; tenant caps (max_leased) limit demand: %d of %d ready jobs cannot run now", p.capHeld, p.ready)
	}
	return b.String()
}
