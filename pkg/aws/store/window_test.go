package store

import "testing"

func TestLeaseWindowWidensOnConflictAndNarrowsOnCleanClaims(t *testing.T) {
	t.Parallel()
	s := &Store{spread: 8, limit: 100}
	if s.leaseWindow() != 8 {
		t.Fatalf("initial window %d, want the configured spread", s.leaseWindow())
	}
	for _, want := range []int{16, 32, 64, 128, 256, 400, 400} {
		s.widenLeaseWindow()
		if got := s.leaseWindow(); got != want {
			t.Fatalf("after a lost claim the window is %d, want %d", got, want)
		}
	}
	for range 400 {
		s.narrowLeaseWindow()
	}
	if s.leaseWindow() != 8 {
		t.Fatalf("after many clean claims the window is %d, want back to 8", s.leaseWindow())
	}
}
