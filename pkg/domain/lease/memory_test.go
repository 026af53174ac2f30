package lease

import "testing"

func TestLeaseWindowWidensOnConflictAndNarrowsOnCleanClaims(t *testing.T) {
	t.Parallel()
	var m Memory
	const spread, most = 8, MaxWindowLimits * 100
	if m.windowOf(spread) != 8 {
		t.Fatalf("initial window %d, want the configured spread", m.windowOf(spread))
	}
	for _, want := range []int{16, 32, 64, 128, 256, 400, 400} {
		m.widen(spread, most)
		if got := m.windowOf(spread); got != want {
			t.Fatalf("after a lost claim the window is %d, want %d", got, want)
		}
	}
	for range 400 {
		m.narrow(spread)
	}
	if m.windowOf(spread) != 8 {
		t.Fatalf("after many clean claims the window is %d, want back to 8", m.windowOf(spread))
	}
}
