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
	beyond int
	reads  int
}

func (s *snapshots) EstimateSnapshot(_ context.Context, fleet string) (eta.Snapshot, error) {
	s.reads++
	snap := eta.Snapshot{Settings: scaling.Settings{Slots: 1, Max: 2}, Beyond: s.beyond}
	for _, id := range s.queued {
		snap.Queued = append(snap.Queued, eta.Queued{Candidate: lease.Candidate{JobID: id, TenantID: "acme", WorkflowID: "wf"}})
	}
	return snap, nil
}

// Reads of one fleet's jobs within EstimateTTL cost one snapshot; a job
// missing from it that changed since (or just before: the index lags)
// reads the fleet again at once, one missing longer waits for the TTL;
// the TTL's end reads again too.
func TestAProcessReadsAFleetOnceInTheTTL(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	long := clk.Now().Add(-time.Hour)
	src := &snapshots{queued: []string{"a", "b"}}
	e := newEstimates(src, clk)
	of := func(fleet, id string, changed time.Time) (eta.Estimate, bool) {
		t.Helper()
		est, ok, err := e.of(t.Context(), fleet, id, changed)
		if err != nil {
			t.Fatal(err)
		}
		return est, ok
	}
	for _, id := range []string{"a", "b", "a"} {
		if _, ok := of("gpu", id, long); !ok {
			t.Fatalf("%s: no estimate", id)
		}
	}
	if src.reads != 1 {
		t.Fatalf("%d reads for three estimates within the TTL, want 1", src.reads)
	}
	clk.Advance(time.Second)
	src.queued = append(src.queued, "c")
	if est, ok := of("gpu", "c", clk.Now()); !ok || est.Position != 3 || src.reads != 2 {
		t.Fatalf("a job queued since: %+v %v after %d reads, want place 3 after 2", est, ok, src.reads)
	}
	if _, ok := of("gpu", "lagging", clk.Now().Add(-EstimateLag/2)); ok || src.reads != 3 {
		t.Fatalf("a job changed just before the snapshot: estimate %v after %d reads, want none after 3", ok, src.reads)
	}
	if _, ok := of("gpu", "gone", long); ok || src.reads != 3 {
		t.Fatalf("a job missing for long: estimate %v after %d reads, want none after 3", ok, src.reads)
	}
	clk.Advance(EstimateTTL - time.Millisecond)
	of("gpu", "a", long)
	if src.reads != 3 {
		t.Fatalf("%d reads within the TTL", src.reads)
	}
	clk.Advance(time.Millisecond)
	of("gpu", "a", long)
	of("other", "a", long)
	if src.reads != 5 {
		t.Fatalf("%d reads after the TTL and of another fleet, want 5", src.reads)
	}
}

// A queued job behind the head of the queue a snapshot holds (a fleet
// with more queued than a projection follows) is answered as beyond it,
// from the same snapshot.
func TestAJobBehindTheSnapshotIsBeyondIt(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	src := &snapshots{queued: []string{"a", "b"}, beyond: 3}
	e := newEstimates(src, clk)
	for _, changed := range []time.Time{clk.Now().Add(-time.Hour), clk.Now()} {
		est, ok, err := e.of(t.Context(), "gpu", "tail", changed)
		if err != nil || !ok {
			t.Fatalf("no estimate (%v)", err)
		}
		if est.Known() || est.Basis != eta.BasisBeyondHorizon || est.WaitingOn.Code != eta.CodeJobsAhead || est.WaitingOn.Text != "at least 2 jobs ahead; too far back in line to project" {
			t.Fatalf("behind the snapshot: %+v", est)
		}
	}
	if src.reads != 2 {
		t.Fatalf("%d reads, want 2 (one more for the job changed since)", src.reads)
	}
}
