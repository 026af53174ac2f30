package scaler

import "testing"

// The tick's reason is built once, from its parts, in one order.
func TestReasonIsBuiltFromItsParts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		parts reasonParts
		want  string
	}{
		{reasonParts{policy: "hold 2"}, "hold 2"},
		{reasonParts{policy: "grow 0→2", advisory: true}, "advisory, no capacity attached: grow 0→2"},
		{reasonParts{policy: "shrink 3→1", kept: 1, weighed: "g5.xlarge moved down", capHeld: 4, ready: 6},
			"shrink 3→1; 1 victim(s) kept: took work or could not be terminated; g5.xlarge moved down; " +
				"tenant caps (max_leased) limit demand: 4 of 6 ready jobs cannot run now"},
	} {
		if got := c.parts.String(); got != c.want {
			t.Errorf("%+v:\n got %q\nwant %q", c.parts, got, c.want)
		}
	}
}
