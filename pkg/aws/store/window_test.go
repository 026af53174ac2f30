package store

import (
	"fmt"
	"testing"
)

func TestSpreadOrderShufflesOnlyTheOldestOfTheTopPriority(t *testing.T) {
	var cands []jobItem
	for i := range 6 {
		cands = append(cands, jobItem{JobID: fmt.Sprintf("hi-%d", i), Priority: 5})
	}
	for i := range 4 {
		cands = append(cands, jobItem{JobID: fmt.Sprintf("lo-%d", i), Priority: 0})
	}
	moved := false
	for range 200 {
		got := spreadOrder(cands, 4)
		if len(got) != len(cands) {
			t.Fatalf("%d candidates in, %d out", len(cands), len(got))
		}
		seen := map[string]bool{}
		for i, c := range got {
			seen[c.JobID] = true
			if i >= 4 && c.JobID != cands[i].JobID {
				t.Fatalf("position %d outside the window moved: %s", i, c.JobID)
			}
			if i < 4 && c.Priority != 5 {
				t.Fatalf("a lower-priority job %s entered the window", c.JobID)
			}
		}
		if len(seen) != len(cands) {
			t.Fatal("candidates lost or duplicated")
		}
		moved = moved || got[0].JobID != "hi-0"
	}
	if !moved {
		t.Fatal("the window was never shuffled")
	}
	if got := spreadOrder(cands, 1); got[0].JobID != "hi-0" || got[9].JobID != "lo-3" {
		t.Fatal("a window of 1 must keep strict order")
	}
}

func TestLeaseWindowWidensOnConflictAndNarrowsOnCleanClaims(t *testing.T) {
	s := &Store{spread: 8, limit: 100}
	if s.leaseWindow() != 8 {
		t.Fatalf("initial window %d, want the configured spread", s.leaseWindow())
	}
	for _, want := range []int{16, 32, 64, 100, 100} {
		s.widenLeaseWindow()
		if got := s.leaseWindow(); got != want {
			t.Fatalf("after a lost claim the window is %d, want %d", got, want)
		}
	}
	for range 200 {
		s.narrowLeaseWindow()
	}
	if s.leaseWindow() != 8 {
		t.Fatalf("after many clean claims the window is %d, want back to 8", s.leaseWindow())
	}
}
