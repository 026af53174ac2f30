package api

import (
	"context"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/eta"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// snapshots answers a fleet's snapshot with the queued jobs given, and
// counts the reads.
type snapshots struct {
	queued []string
	reads  int
}

func (s *snapshots) EstimateSnapshot(_ context.Context, fleet string) (eta.Snapshot, error) {
	s.reads++
	snap := eta.Snapshot{Settings: scaling.Settings{Slots: 1, Max: 2}}
	for _, id := range s.queued {
		snap.Queued = append(snap.Queued, eta.Queued{Candidate: lease.Candidate{JobID: id, TenantID: "acme", WorkflowID: "wf"}})
	}
	return snap, nil
}

// Reads of one fleet's jobs within EstimateTTL cost one snapshot; a job
// queued since, missing from it, reads the fleet again at once; the TTL's
// end too.
func TestAProcessReadsAFleetOnceInTheTTL(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	src := &snapshots{queued: []string{"a", "b"}}
	e := newEstimates(src, clk)
	for _, id := range []string{"a", "b", "a"} {
		if _, ok, err := e.of(t.Context(), "gpu", id); !ok || err != nil {
			t.Fatalf("%s: %v, %v", id, ok, err)
		}
	}
	if src.reads != 1 {
		t.Fatalf("%d reads for three estimates within the TTL, want 1", src.reads)
	}
	src.queued = append(src.queued, "c")
	if est, ok, _ := e.of(t.Context(), "gpu", "c"); !ok || est.Position != 3 || src.reads != 2 {
		t.Fatalf("a job queued since: %+v %v after %d reads, want place 3 after 2", est, ok, src.reads)
	}
	if _, ok, _ := e.of(t.Context(), "gpu", "gone"); ok || src.reads != 3 {
		t.Fatalf("a job no longer queued: estimate %v after %d reads", ok, src.reads)
	}
	clk.Advance(EstimateTTL - time.Millisecond)
	e.of(t.Context(), "gpu", "a")
	if src.reads != 3 {
		t.Fatalf("%d reads within the TTL", src.reads)
	}
	clk.Advance(time.Millisecond)
	e.of(t.Context(), "gpu", "a")
	e.of(t.Context(), "other", "a")
	if src.reads != 5 {
		t.Fatalf("%d reads after the TTL and of another fleet, want 5", src.reads)
	}
}
