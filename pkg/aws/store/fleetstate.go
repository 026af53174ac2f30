package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/forecast"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Fleet state: what the scaler reads and writes. The fleet's live backlog in
// one pass, its recent outcomes, wake on enqueue, and decision records, kept
// in one item per fleet (fleetKey) next to the worker counter.

// CountBacklog counts a fleet's queued and leased jobs. It reads only the
// live partitions of the index, so its cost follows the live backlog and
// never the number of finished jobs.
func (s *Store) CountBacklog(ctx context.Context, fleet string) (fleetstate.Backlog, error) {
	var b fleetstate.Backlog
	var err error
	if b.Ready, err = s.countReady(ctx, fleet); err != nil {
		return b, err
	}
	if b.Delayed, err = s.countIndex(ctx, delayedPartition(fleet)); err != nil {
		return b, err
	}
	if b.Leased, err = s.countShards(ctx, s.shardPartitions(prefixLeased, fleet)); err != nil {
		return b, err
	}
	return b, nil
}

// fleetItem is a fleet's state as stored.
type fleetItem struct {
	Workers      int                         `dynamodbav:"workers"`
	Desired      int                         `dynamodbav:"desired"`
	InService    int                         `dynamodbav:"in_service"`
	LastActiveMS int64                       `dynamodbav:"last_active_ms"`
	LastDecision *fleetstate.DecisionRecord  `dynamodbav:"last_decision"`
	History      []fleetstate.DecisionRecord `dynamodbav:"history"`
	FirstSeen    map[string]int64            `dynamodbav:"first_seen"`
	WokenMS      int64                       `dynamodbav:"woken_ms"`
	// DecisionSeq counts the decisions written (ticks and wakes), so a
	// wake can write only on the state it read.
	DecisionSeq int64 `dynamodbav:"decision_seq"`
	// ForecastHours are the forecast's hours of demand keyed by
	// forecast.HourOf in decimal (the scaler prunes those past the
	// lookback); ForecastBudget its spend today; ForecastMS its last tick.
	ForecastHours  map[string]forecast.Hour `dynamodbav:"forecast_hours"`
	ForecastBudget forecast.Budget          `dynamodbav:"forecast_budget"`
	ForecastMS     int64                    `dynamodbav:"forecast_ms"`
	// BootsMS are the fleet's latest boots in milliseconds, oldest first
	// (State.Boots).
	BootsMS []int64 `dynamodbav:"boots_ms,omitempty"`
}

// GetFleetState reads a fleet's state; a fleet never touched reads as zeros.
func (s *Store) GetFleetState(ctx context.Context, slug string) (fleetstate.State, error) {
	pk, sk := fleetKey(slug)
	var it fleetItem
	if _, err := s.getItem(ctx, pk, sk, &it); err != nil {
		return fleetstate.State{}, err
	}
	st := fleetstate.State{
		Slug: slug, Workers: it.Workers, Desired: it.Desired, InService: it.InService,
		LastActiveAt: fromMS(it.LastActiveMS), LastDecision: it.lastDecision(),
		History: it.history(), WokenAt: fromMS(it.WokenMS), Seq: it.DecisionSeq,
	}
	st.Forecast = fleetstate.Forecast{Budget: it.ForecastBudget, At: fromMS(it.ForecastMS)}
	if len(it.ForecastHours) > 0 {
		st.Forecast.Hours = make(forecast.History, len(it.ForecastHours))
		for k, h := range it.ForecastHours {
			if n, err := strconv.ParseInt(k, 10, 64); err == nil {
				st.Forecast.Hours[n] = h
			}
		}
	}
	for _, b := range it.BootsMS {
		st.Boots = append(st.Boots, time.Duration(b)*time.Millisecond)
	}
	if len(it.FirstSeen) > 0 {
		st.FirstSeen = make(map[string]time.Time, len(it.FirstSeen))
		for id, v := range it.FirstSeen {
			st.FirstSeen[id] = fromMS(v)
		}
	}
	return st, nil
}

// FleetSnapshot reads a fleet's live backlog. Its cost follows the live
// backlog (ready + delayed + leased), never the finished jobs. The jobs
// pinned to On-Demand are counted on the ready and leased items it reads
// anyway (on_demand_only is in the index projection): no request more.
func (s *Store) FleetSnapshot(ctx context.Context, fleet string) (fleetstate.Snapshot, error) {
	snap := fleetstate.Snapshot{LeasesByWorker: map[string]int{}}
	ready, err := s.readReady(ctx, fleet, 0)
	if err != nil {
		return snap, err
	}
	snap.Ready = len(ready)
	if s.leaseCaps() {
		snap.ReadyByTenant, snap.LeasedByTenant = map[string]int{}, map[string]int{}
	}
	for _, it := range ready {
		c := fromMS(it.CreatedMS)
		snap.Created = append(snap.Created, c)
		if !c.IsZero() && (snap.OldestReady.IsZero() || c.Before(snap.OldestReady)) {
			snap.OldestReady = c
		}
		if it.OnDemandOnly {
			snap.OnDemandOnlyReady++
		}
		if snap.ReadyByTenant != nil {
			snap.ReadyByTenant[it.TenantID]++
		}
	}
	if snap.Delayed, err = s.countIndex(ctx, delayedPartition(fleet)); err != nil {
		return snap, err
	}
	leased, err := s.readShards(ctx, s.shardPartitions(prefixLeased, fleet), "", "", 0, true)
	if err != nil {
		return snap, err
	}
	snap.Leased = len(leased)
	for _, it := range leased {
		snap.LeasesByWorker[it.WorkerID]++
		snap.Created = append(snap.Created, fromMS(it.CreatedMS))
		if it.OnDemandOnly {
			snap.OnDemandOnlyLeased++
		}
		if snap.LeasedByTenant != nil {
			snap.LeasedByTenant[it.TenantID]++
		}
	}
	return snap, nil
}

// RecentOutcomes reads the succeeded and dead jobs of a fleet that ended at
// or after since. The read is bounded by the jobs finished in that window
// (the terminal partitions are ordered by finish time).
func (s *Store) RecentOutcomes(ctx context.Context, fleet string, since time.Time) (fleetstate.Outcomes, error) {
	var o fleetstate.Outcomes
	ok, err := s.readShards(ctx, s.terminalPartitions(fleet, job.Succeeded), sortTime(since), "", 0, true)
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
	dead, err := s.readShards(ctx, s.terminalPartitions(fleet, job.Dead), sortTime(since), "", 0, true)
	if err != nil {
		return o, err
	}
	o.Dead = len(dead)
	return o, nil
}

// decisionAttempts bounds how many times a wake or a tick reads the fleet's state again
// after another decision was written between its read and its write.
const decisionAttempts = 5

// WakeFleet raises a fleet's recorded desired capacity from zero to desired
// for scale-from-zero on enqueue, and records reason as the fleet's last
// decision and at the head of its history, with the ready jobs that woke it
// and the workers and desired capacity it had (fleetstate.NewWakeInputs),
// all in one conditional write: the fleet must still be at zero and no other
// decision written since the state was read. Only the first of concurrent
// callers wins; it answers whether this caller did and must therefore raise
// the group itself. A fleet already above zero is left as it is.
func (s *Store) WakeFleet(ctx context.Context, fleet string, ready, desired int, reason scaling.Reason) (bool, error) {
	if desired <= 0 {
		return false, nil
	}
	pk, sk := fleetKey(fleet)
	for range decisionAttempts {
		var it fleetItem
		if _, err := s.getItem(ctx, pk, sk, &it); err != nil {
			return false, err
		}
		if it.Desired > 0 {
			return false, nil
		}
		now := s.clock.Now()
		d := fleetstate.Decision{At: now, Desired: desired, Reason: reason, InService: it.InService,
			Inputs: fleetstate.NewWakeInputs(ready, it.Workers, it.Desired, desired)}
		set, err := decisionSet(expression.Set(expression.Name(attrDesired), expression.Value(desired)).
			Set(expression.Name(attrWokenMS), expression.Value(ms(now))).
			Set(expression.Name(attrLastActiveMS), expression.Value(ms(now))),
			d, withDecision(it.lastDecision(), it.history(), d))
		if err != nil {
			return false, fmt.Errorf("wake fleet %s: %w", fleet, err)
		}
		cond := expression.AttributeNotExists(expression.Name(attrDesired)).
			Or(expression.Name(attrDesired).LessThanEqual(expression.Value(0))).
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

// RecordBridgeStart records that start bridge instances were started from
// the fleet's pool between ticks (scaler.Waker, on enqueue), with why: a
// decision in the fleet's history whose desired capacity is the one recorded
// before plus start, as the next tick's decision counts Spot and On-Demand
// together; its inputs are those given with the desired capacity before and
// after (Inputs.Changed). It lands only on the state it read, and reads
// again when a wake or a tick wrote meanwhile.
func (s *Store) RecordBridgeStart(ctx context.Context, fleet string, start int, reason scaling.Reason, inputs fleetstate.Inputs) error {
	if start <= 0 {
		return nil
	}
	return s.appendDecision(ctx, fleet, "bridge start", func(it fleetItem) fleetstate.Decision {
		return fleetstate.Decision{At: s.clock.Now(), Desired: it.Desired + start, Reason: reason, InService: it.InService,
			Inputs: inputs.Changed(it.Desired, it.Desired+start)}
	})
}

// appendDecision records the decision decide makes of the fleet's state as
// read (its desired capacity becomes the decision's) as the fleet's last
// and in its history, on the condition that no other decision came in
// between; a decision that did is read again and decided again.
func (s *Store) appendDecision(ctx context.Context, fleet, what string, decide func(fleetItem) fleetstate.Decision) error {
	pk, sk := fleetKey(fleet)
	for range decisionAttempts {
		var it fleetItem
		if _, err := s.getItem(ctx, pk, sk, &it); err != nil {
			return err
		}
		d := decide(it)
		set, err := decisionSet(expression.Set(expression.Name(attrDesired), expression.Value(d.Desired)), d, withDecision(it.lastDecision(), it.history(), d))
		if err != nil {
			return fmt.Errorf("record %s of %s: %w", what, fleet, err)
		}
		err = s.updateItem(ctx, update{pk: pk, sk: sk, set: set, cond: decisionUnchanged(it.DecisionSeq)})
		if errors.Is(err, errConditionFailed) {
			continue
		}
		if err != nil {
			return fmt.Errorf("record %s of %s: %w", what, fleet, err)
		}
		return nil
	}
	return fmt.Errorf("record %s of %s: %w", what, fleet, ErrContention)
}

// lastDecision and history are the fleet's decisions as read.
func (it fleetItem) lastDecision() *fleetstate.Decision {
	if it.LastDecision == nil {
		return nil
	}
	d := it.LastDecision.Decision()
	return &d
}

func (it fleetItem) history() []fleetstate.Decision {
	if it.History == nil {
		return nil
	}
	out := make([]fleetstate.Decision, len(it.History))
	for i, d := range it.History {
		out[i] = d.Decision()
	}
	return out
}

// withDecision is the history after d: d goes first when it changed
// anything or said something new, and the history keeps fleetstate.DecisionHistory.
func withDecision(last *fleetstate.Decision, hist []fleetstate.Decision, d fleetstate.Decision) []fleetstate.Decision {
	if last != nil && last.Reason.Says(d.Reason) && last.Desired == d.Desired && len(d.Victims) == 0 {
		return hist
	}
	hist = append([]fleetstate.Decision{d}, hist...)
	if len(hist) > fleetstate.DecisionHistory {
		hist = hist[:fleetstate.DecisionHistory]
	}
	return hist
}

// decisionSet adds a decision to a fleet state write: d as the last
// decision, hist as the history, and one more on the decision sequence that
// a wake's condition checks. It is the one encoding of decisions.
func decisionSet(set expression.UpdateBuilder, d fleetstate.Decision, hist []fleetstate.Decision) (expression.UpdateBuilder, error) {
	dv, err := attributevalue.Marshal(d.Record())
	if err != nil {
		return set, fmt.Errorf("encode decision: %w", err)
	}
	set = set.Set(expression.Name(attrLastDecision), expression.Value(dv)).
		Add(expression.Name(attrDecisionSeq), expression.Value(1))
	// Empty lists and maps are written as NULL (see docs/testing.md).
	if len(hist) > 0 {
		items := make([]fleetstate.DecisionRecord, len(hist))
		for i, h := range hist {
			items[i] = h.Record()
		}
		hv, err := attributevalue.Marshal(items)
		if err != nil {
			return set, fmt.Errorf("encode decision history: %w", err)
		}
		set = set.Set(expression.Name(attrHistory), expression.Value(hv))
	}
	return set, nil
}

// decisionUnchanged is the condition that no decision was written since
// the fleet's state was read with sequence seq.
func decisionUnchanged(seq int64) expression.ConditionBuilder {
	if seq == 0 {
		return expression.AttributeNotExists(expression.Name(attrDecisionSeq))
	}
	return expression.Name(attrDecisionSeq).Equal(expression.Value(seq))
}

// RecordDecision stores a fleet's decision as its last one, keeps it in the
// bounded history when it changed anything or said something new, and
// carries the idle clock and instance first-seen times to the next tick.
// prev is the fleet's state the decision was made from; the write lands
// only on it, so a wake recorded meanwhile is read again and kept in the
// history under the tick's decision.
func (s *Store) RecordDecision(ctx context.Context, fleet string, r fleetstate.Record, prev fleetstate.State) error {
	for range decisionAttempts {
		err := s.recordDecision(ctx, fleet, r, prev)
		if !errors.Is(err, errConditionFailed) {
			return err
		}
		if prev, err = s.GetFleetState(ctx, fleet); err != nil {
			return err
		}
	}
	return fmt.Errorf("record decision of %s: %w", fleet, ErrContention)
}

func (s *Store) recordDecision(ctx context.Context, fleet string, r fleetstate.Record, prev fleetstate.State) error {
	d := r.Decision
	seen := make(map[string]int64, len(r.FirstSeen))
	for id, t := range r.FirstSeen {
		seen[id] = ms(t)
	}
	set, err := decisionSet(expression.Set(expression.Name(attrDesired), expression.Value(d.Desired)).
		Set(expression.Name(attrInService), expression.Value(d.InService)).
		Set(expression.Name(attrLastActiveMS), expression.Value(ms(r.LastActiveAt))),
		d, withDecision(prev.LastDecision, prev.History, d))
	if err != nil {
		return fmt.Errorf("record decision of %s: %w", fleet, err)
	}
	if len(seen) > 0 {
		sv, err := attributevalue.Marshal(seen)
		if err != nil {
			return err
		}
		set = set.Set(expression.Name(attrFirstSeen), expression.Value(sv))
	} else {
		set = set.Set(expression.Name(attrFirstSeen), null())
	}
	if len(r.Boots) > 0 {
		boots := make([]int64, len(r.Boots))
		for i, b := range r.Boots {
			boots[i] = b.Milliseconds()
		}
		set = set.Set(expression.Name(attrBootsMS), expression.Value(boots))
	}
	if r.Forecast != nil {
		if set, err = forecastSet(set, *r.Forecast); err != nil {
			return fmt.Errorf("record decision of %s: %w", fleet, err)
		}
	}
	pk, sk := fleetKey(fleet)
	err = s.updateItem(ctx, update{pk: pk, sk: sk, set: set, cond: decisionUnchanged(prev.Seq)})
	if err != nil && !errors.Is(err, errConditionFailed) {
		return fmt.Errorf("record decision of %s: %w", fleet, err)
	}
	return err
}

// forecastSet writes the forecast's memory with the decision: the same
// write the tick makes anyway, so the forecast costs no request of its own.
func forecastSet(set expression.UpdateBuilder, f fleetstate.Forecast) (expression.UpdateBuilder, error) {
	hours := make(map[string]forecast.Hour, len(f.Hours))
	for k, h := range f.Hours {
		hours[strconv.FormatInt(k, 10)] = h
	}
	hv, err := attributevalue.Marshal(hours)
	if err != nil {
		return set, err
	}
	bv, err := attributevalue.Marshal(f.Budget)
	if err != nil {
		return set, err
	}
	return set.Set(expression.Name(attrForecastHours), expression.Value(hv)).
		Set(expression.Name(attrForecastBudget), expression.Value(bv)).
		Set(expression.Name(attrForecastMS), expression.Value(ms(f.At))), nil
}
