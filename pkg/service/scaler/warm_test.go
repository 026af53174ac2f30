package scaler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// A fleet's warm window raises it ahead of any job, holds the warm workers
// while the window is open, and lets them go once it has closed.
func TestWarmWindowKeepsCapacityAheadOfDemand(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w, err := fleetconfig.ParseWarmWindow("08:00-10:00,min=2")
	if err != nil {
		t.Fatal(err)
	}
	h.sys.Store.Config().Fleets[0].Warm = []fleetconfig.WarmWindow{w}

	r := h.tick() // 09:00, no job
	if r.Desired != 2 || !strings.Contains(r.Decision.Reason.String(), "warm 08:00-10:00: at least 2") {
		t.Fatalf("in the window: desired %d (%s)", r.Desired, r.Decision.Reason)
	}
	h.advance(5 * time.Minute)
	if r := h.tick(); r.Desired != 2 || r.Decision.Counts.Idle != 2 || len(r.Terminated) != 0 {
		t.Fatalf("warm idle workers: desired %d, %d idle, terminated %v (%s)", r.Desired, r.Decision.Counts.Idle, r.Terminated, r.Decision.Reason)
	}
	h.advance(time.Hour) // 10:05: the window has closed
	r = h.tick()
	if r.Desired != 0 || len(r.Terminated) != 2 || !strings.Contains(r.Decision.Reason.String(), "shrink 2→0") {
		t.Fatalf("after the window: desired %d, terminated %v (%s)", r.Desired, r.Terminated, r.Decision.Reason)
	}
}
