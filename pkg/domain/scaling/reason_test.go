package scaling

import (
	"strings"
	"testing"
	"time"
)

// A tick's reason carries the direction of its decision as a code, so a
// reader tells a grow from a hold without reading the line.
func TestReasonCodeIsTheDecisionsDirection(t *testing.T) {
	t.Parallel()
	idle := func() Input {
		in := (&fleet{}).worker(0, time.Hour).worker(0, time.Hour).input(0, 0)
		in.LastActiveAt = t0.Add(-time.Hour)
		return in
	}
	for _, c := range []struct {
		name string
		in   Input
		code ReasonCode
		head string
	}{
		{"work from zero", (&fleet{}).input(5, 0), ReasonGrow, "grow 0→3: "},
		{"booting capacity covers the work", (&fleet{}).booting(time.Minute).booting(time.Minute).input(4, 0), ReasonHold, "hold 2: "},
		{"idle past the window", idle(), ReasonShrink, "shrink 2→0: "},
	} {
		d := Decide(c.in)
		if d.Reason.Code() != c.code || !strings.HasPrefix(d.Reason.String(), c.head) {
			t.Errorf("%s: reason %q code %q, want code %q and %q first", c.name, d.Reason, d.Reason.Code(), c.code, c.head)
		}
	}
}

// The bridge's part of a tick's reason is the wake's bridge reason for the
// same numbers, word for word: one wording of what Spot does.
func TestBridgeStartIsWordedOnce(t *testing.T) {
	t.Parallel()
	d := DecideBridge(bridged(&fleet{}, 2, 6, 0))
	if d.Start == 0 {
		t.Fatalf("no bridge started: %s", d.Reason)
	}
	wake := BridgeStartReason(d.Start, 6, 0, SpotLaunching)
	if !strings.Contains(d.Reason.String(), "; "+wake.String()+";") && !strings.HasSuffix(d.Reason.String(), "; "+wake.String()) {
		t.Fatalf("tick reason %q does not carry the wake's %q", d.Reason, wake)
	}
	if d.Reason.Code() != ReasonGrow || wake.Code() != ReasonBridge {
		t.Fatalf("codes %q and %q, want grow (the tick) and bridge (the wake)", d.Reason.Code(), wake.Code())
	}
	if got := BridgeStartReason(1, 1, 0, SpotAtMax(4)).String(); got != "bridge 1: 1 ready jobs, 0 idle workers, Spot at its max 4" {
		t.Fatalf("at max: %q", got)
	}
}

// A reason grows by parts, and says the same as another by its line.
func TestReasonWith(t *testing.T) {
	t.Parallel()
	r := WakeReason(2).With("").With("more")
	if r.String() != "woken by 2 ready jobs; more" || r.Code() != ReasonWake {
		t.Fatalf("with: %q %q", r, r.Code())
	}
	if !r.Says(RecordedReason("", r.String())) || r.Says(WakeReason(2)) {
		t.Fatalf("says: a record without a code must say the same line, a shorter line must not")
	}
	if got := (Reason{}).With("no work").Advisory().String(); got != "advisory, no capacity attached: no work" {
		t.Fatalf("advisory: %q", got)
	}
}
