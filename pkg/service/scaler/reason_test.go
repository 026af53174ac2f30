package scaler

import (
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// The tick's reason is built once, from its parts, in one order, and keeps
// the policy's code.
func TestReasonIsBuiltFromItsParts(t *testing.T) {
	t.Parallel()
	hold := scaling.RecordedReason(scaling.ReasonHold, "hold 2")
	grow := scaling.RecordedReason(scaling.ReasonGrow, "grow 0→2")
	shrink := scaling.RecordedReason(scaling.ReasonShrink, "shrink 3→1")
	for _, c := range []struct {
		parts reasonParts
		want  string
	}{
		{reasonParts{policy: hold}, "hold 2"},
		{reasonParts{policy: grow, advisory: true}, "advisory, no capacity attached: grow 0→2"},
		{reasonParts{policy: shrink, kept: 1, weighed: "g5.xlarge moved down", capHeld: 4, ready: 6},
			"shrink 3→1; 1 victim(s) kept: took work or could not be terminated; g5.xlarge moved down; " +
				"tenant caps (max_leased) limit demand: 4 of 6 ready jobs cannot run now"},
	} {
		got := c.parts.reason()
		if got.String() != c.want || got.Code() != c.parts.policy.Code() {
			t.Errorf("%+v:\n got %q (%s)\nwant %q (%s)", c.parts, got, got.Code(), c.want, c.parts.policy.Code())
		}
	}
}
