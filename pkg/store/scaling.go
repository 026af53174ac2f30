package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// What the scaler reads and writes: the fleet's live backlog in one pass,
// wake-on-enqueue, decision records, and the lease-count safety net.

// DecisionHistory is how many decisions a fleet keeps besides the last.
const DecisionHistory = 20

// LeaseCountQuiet is how long a worker must have made no claim before its
// lease count may be reconciled from the index: long past any index lag, so
// a claim the index has not shown yet can never be counted away.
const LeaseCountQuiet = 2 * time.Minute

// Snapshot is a fleet's live work as the scaler sees it, read from the
// ready, delayed and leased partitions of the index only.
type Snapshot struct {
	Backlog
	// OldestReady is when the oldest ready job was created (zero: none).
	OldestReady time.Time
	// LeasesByWorker counts leased jobs per worker.
	LeasesByWorker map[string]int
}

// FleetSnapshot reads a fleet's live backlog. Its cost follows the live
// backlog (ready + delayed + leased), never the finished jobs.
func (s *Store) FleetSnapshot(ctx context.Context, fleet string) (Snapshot, error) {
	snap := Snapshot{LeasesByWorker: map[string]int{}}
	ready, err := s.queryIndex(ctx, readyPartition(fleet), "", 0, true)
	if err != nil {
		return snap, err
	}
	snap.Ready = len(ready)
	for _, it := range ready {
		if c := fromMS(it.CreatedMS); !c.IsZero() && (snap.OldestReady.IsZero() || c.Before(snap.OldestReady)) {
			snap.OldestReady = c
		}
	}
	if snap.Delayed, err = s.countIndex(ctx, delayedPartition(fleet)); err != nil {
		return snap, err
	}
	leased, err := s.queryIndex(ctx, leasedPartition(fleet), "", 0, true)
	if err != nil {
		return snap, err
	}
	snap.Leased = len(leased)
	for _, it := range leased {
		snap.LeasesByWorker[it.WorkerID]++
	}
	return snap, nil
}

// Outcomes summarizes the jobs of a fleet that ended since a time.
type Outcomes struct {
	Succeeded, Dead int
	// Runs are the last attempts' run times of the succeeded jobs, sorted.
	Runs []time.Duration
}

// RecentOutcomes reads the succeeded and dead jobs of a fleet that ended at
// or after since. The read is bounded by the jobs finished in that window
// (the terminal partitions are ordered by finish time).
func (s *Store) RecentOutcomes(ctx context.Context, fleet string, since time.Time) (Outcomes, error) {
	var o Outcomes
	ok, err := s.queryIndexRange(ctx, terminalPartition(fleet, "succeeded"), sortTime(since), "", 0, true)
	if err != nil {
		return o, err
	}
	o.Succeeded = len(ok)
	for _, it := range ok {
		if it.LeasedMS > 0 && it.UpdatedMS >= it.LeasedMS {
			o.Runs = append(o.Runs, time.Duration(it.UpdatedMS-it.LeasedMS)*time.Millisecond)
		}
	}
	sort.Slice(o.Runs, func(i, j int) bool { return o.Runs[i] < o.Runs[j] })
	dead, err := s.queryIndexRange(ctx, terminalPartition(fleet, "dead"), sortTime(since), "", 0, true)
	if err != nil {
		return o, err
	}
	o.Dead = len(dead)
	return o, nil
}

// wakeAttempts bounds how many times a wake reads the fleet's state again
// after another decision was written between its read and its write.
const wakeAttempts = 5

// WakeFleet raises a fleet's recorded desired capacity from zero to desired
// for scale-from-zero on enqueue, and records why as the fleet's last
// decision and at the head of its history ("woken by 6 ready jobs"), all in
// one conditional write: the fleet must still be at zero and no other
// decision written since the state was read. Only the first of concurrent
// callers wins; it answers whether this caller did and must therefore raise
// the group itself. A fleet already above zero is left as it is.
func (s *Store) WakeFleet(ctx context.Context, fleet string, ready, desired int) (bool, error) {
	if desired <= 0 {
		return false, nil
	}
	pk, sk := fleetKey(fleet)
	for range wakeAttempts {
		var it fleetItem
		if _, err := s.getItem(ctx, pk, sk, &it); err != nil {
			return false, err
		}
		if it.Desired > 0 {
			return false, nil
		}
		now := s.clock.Now()
		d := Decision{At: now, Desired: desired, Reason: wakeReason(ready), InService: it.InService,
			Inputs: map[string]int{"ready": ready, "workers": it.Workers, "desired_before": it.Desired, "desired_after": desired}}
		set, err := decisionSet(expression.Set(expression.Name("desired"), expression.Value(desired)).
			Set(expression.Name("woken_ms"), expression.Value(ms(now))).
			Set(expression.Name("last_active_ms"), expression.Value(ms(now))),
			d, withDecision(it.LastDecision, it.History, d))
		if err != nil {
			return false, fmt.Errorf("wake fleet %s: %w", fleet, err)
		}
		cond := expression.AttributeNotExists(expression.Name("desired")).
			Or(expression.Name("desired").LessThanEqual(expression.Value(0))).
			And(decisionUnchanged(it.DecisionSeq))
		err = s.updateItem(ctx, update{pk: pk, sk: sk, set: set, cond: cond})
		if errors.Is(err, errConditionFailed) {
			continue // another wake or a tick got there first: look again
		}
		if err != nil {
			return false, fmt.Errorf("wake fleet %s: %w", fleet, err)
		}
		s.log.Info("fleet woken", "fleet", fleet, "desired", desired, "ready", ready)
		return true, nil
	}
	return false, fmt.Errorf("wake fleet %s: %w", fleet, ErrContention)
}

func wakeReason(ready int) string {
	if ready == 1 {
		return "woken by 1 ready job"
	}
	return fmt.Sprintf("woken by %d ready jobs", ready)
}

// withDecision is the history after d: d goes first when it changed
// anything or said something new, and the history keeps DecisionHistory.
func withDecision(last *Decision, hist []Decision, d Decision) []Decision {
	if last != nil && last.Reason == d.Reason && last.Desired == d.Desired && len(d.Victims) == 0 {
		return hist
	}
	hist = append([]Decision{d}, hist...)
	if len(hist) > DecisionHistory {
		hist = hist[:DecisionHistory]
	}
	return hist
}

// decisionSet adds a decision to a fleet state write: d as the last
// decision, hist as the history, and one more on the decision sequence that
// a wake's condition checks. It is the one encoding of decisions.
func decisionSet(set expression.UpdateBuilder, d Decision, hist []Decision) (expression.UpdateBuilder, error) {
	dv, err := attributevalue.Marshal(d)
	if err != nil {
		return set, fmt.Errorf("encode decision: %w", err)
	}
	set = set.Set(expression.Name("last_decision"), expression.Value(dv)).
		Add(expression.Name("decision_seq"), expression.Value(1))
	// Empty lists and maps are written as NULL (see docs/testing.md).
	if len(hist) > 0 {
		hv, err := attributevalue.Marshal(hist)
		if err != nil {
			return set, fmt.Errorf("encode decision history: %w", err)
		}
		set = set.Set(expression.Name("history"), expression.Value(hv))
	}
	return set, nil
}

// decisionUnchanged is the condition that no decision was written since
// the fleet's state was read with sequence seq.
func decisionUnchanged(seq int64) expression.ConditionBuilder {
	if seq == 0 {
		return expression.AttributeNotExists(expression.Name("decision_seq"))
	}
	return expression.Name("decision_seq").Equal(expression.Value(seq))
}

// FleetRecord is what the scaler writes after a tick.
type FleetRecord struct {
	Decision     Decision
	LastActiveAt time.Time
	// FirstSeen is when each live instance of the group was first seen (the
	// group does not report launch times; the boot timeout runs from this).
	FirstSeen map[string]time.Time
}

// RecordDecision stores a fleet's decision as its last one, keeps it in the
// bounded history when it changed anything or said something new, and
// carries the idle clock and instance first-seen times to the next tick.
func (s *Store) RecordDecision(ctx context.Context, fleet string, r FleetRecord) error {
	st, err := s.GetFleetState(ctx, fleet)
	if err != nil {
		return err
	}
	d := r.Decision
	seen := make(map[string]int64, len(r.FirstSeen))
	for id, t := range r.FirstSeen {
		seen[id] = ms(t)
	}
	set, err := decisionSet(expression.Set(expression.Name("desired"), expression.Value(d.Desired)).
		Set(expression.Name("in_service"), expression.Value(d.InService)).
		Set(expression.Name("last_active_ms"), expression.Value(ms(r.LastActiveAt))),
		d, withDecision(st.LastDecision, st.History, d))
	if err != nil {
		return fmt.Errorf("record decision of %s: %w", fleet, err)
	}
	if len(seen) > 0 {
		sv, err := attributevalue.Marshal(seen)
		if err != nil {
			return err
		}
		set = set.Set(expression.Name("first_seen"), expression.Value(sv))
	} else {
		set = set.Set(expression.Name("first_seen"), null())
	}
	pk, sk := fleetKey(fleet)
	if err := s.updateItem(ctx, update{pk: pk, sk: sk, set: set}); err != nil {
		return fmt.Errorf("record decision of %s: %w", fleet, err)
	}
	return nil
}

// ReconcileLeaseCounts is a safety net: every lease start and end moves the
// job and its worker's count in one transaction, so counts should never
// drift; if one has (a bug, a manual edit), it is set to the leased jobs the
// index shows for the worker. A worker that claimed a job in the last
// LeaseCountQuiet is left alone, so index lag can never hide a fresh claim,
// and the write is conditional on the count read.
func (s *Store) ReconcileLeaseCounts(ctx context.Context, fleet string, held map[string]int) (int, error) {
	workers, err := s.ListWorkers(ctx, fleet)
	if err != nil {
		return 0, err
	}
	cutoff := s.clock.Now().Add(-LeaseCountQuiet)
	fixed := 0
	for _, w := range workers {
		n := held[w.ID]
		if w.Leases == n || w.LastClaimAt.After(cutoff) {
			continue
		}
		pk, sk := workerKey(w.ID)
		err := s.updateItem(ctx, update{pk: pk, sk: sk,
			set: expression.Set(expression.Name("leases"), expression.Value(n)),
			cond: expression.Name("leases").Equal(expression.Value(w.Leases)).
				And(expression.Name("last_claim_ms").LessThan(expression.Value(ms(cutoff))).
					Or(expression.AttributeNotExists(expression.Name("last_claim_ms")))),
		})
		if errors.Is(err, errConditionFailed) {
			continue // it moved meanwhile; the next tick looks again
		}
		if err != nil {
			return fixed, fmt.Errorf("reconcile lease count of %s: %w", w.ID, err)
		}
		s.log.Warn("worker lease count reconciled", "worker_id", w.ID, "fleet", fleet, "was", w.Leases, "now", n)
		fixed++
	}
	return fixed, nil
}

// RemoveStaleWorkers removes the workers of a fleet not seen since before
// cutoff (their leases, if any, are requeued first). It answers how many.
func (s *Store) RemoveStaleWorkers(ctx context.Context, fleet string, cutoff time.Time) (int, error) {
	workers, err := s.ListWorkers(ctx, fleet)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, w := range workers {
		if w.LastSeenAt.IsZero() || !w.LastSeenAt.Before(cutoff) {
			continue
		}
		if _, err := s.RemoveWorker(ctx, w.ID, "stale"); err != nil && !errors.Is(err, ErrNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}
