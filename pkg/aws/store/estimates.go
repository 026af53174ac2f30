package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/eta"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// Reads for a queued job's estimate (GET /api/jobs/{job_id}): what
// eta.Project reads of one fleet. Their cost follows the live backlog, the
// fleet's workers and a bounded sample of finished jobs, never
// the fleet's history (docs/data-model.md, "Estimates").

// RunSamples bounds the run times an estimate reads: those of the newest
// RunSamples jobs (spread over the shards) that succeeded within
// RunWindow, as many as the simulator keeps per workflow.
const (
	RunWindow  = 24 * time.Hour
	RunSamples = 200
)

// TickInterval is the scaler's schedule (rate(1 minute)).
const TickInterval = time.Minute

// EstimateSnapshot reads everything a projection of the fleet's queued
// jobs needs (eta.Snapshot): its live jobs (FleetQueue), workers, state
// (the instances the last tick saw, its desired capacity, idle clock, last
// tick and latest boots) and recent run times by workflow (RecentRuns).
// The instances are those the scaler recorded as first seen
// (estimateWorkers); a fleet with an On-Demand rung adds its Spot group as
// the last tick recorded it (estimateSpot).
func (s *Store) EstimateSnapshot(ctx context.Context, fleet string) (eta.Snapshot, error) {
	f, err := s.fleet(fleet)
	if err != nil {
		return eta.Snapshot{}, err
	}
	now := s.clock.Now()
	snap := eta.Snapshot{Settings: scaling.SettingsOf(f), Interval: TickInterval}
	if len(s.cfg.Tenants) > 0 {
		snap.Tenants = s.cfg.Tenant
	}
	queued, running, complete, err := s.FleetQueue(ctx, fleet, eta.MaxProjected)
	if err != nil {
		return snap, err
	}
	snap.Queued, snap.Running = queued, running
	workers, err := s.ListWorkers(ctx, fleet)
	if err != nil {
		return snap, err
	}
	st, err := s.GetFleetState(ctx, fleet)
	if err != nil {
		return snap, err
	}
	snap.Desired, snap.LastActiveAt = st.Desired, st.LastActiveAt
	last, ticked := st.LastTick()
	if ticked {
		snap.NextTick = last.At.Add(TickInterval)
	}
	if !complete {
		// The jobs behind the head read: as many as the last tick counted,
		// at least one.
		snap.Beyond = 1
		if ticked && last.Inputs.Tick != nil {
			snap.Beyond = max(1, last.Inputs.Tick.Ready+last.Inputs.Tick.Delayed-len(snap.Queued))
		}
	}
	askedAt := now
	if st.LastDecision != nil && !st.LastDecision.At.IsZero() {
		askedAt = st.LastDecision.At
	}
	snap.Workers, snap.Instances = estimateWorkers(workers, st.FirstSeen, st.Desired, askedAt)
	if f.OnDemand.Enabled() && ticked && last.Inputs.Ladder != nil {
		onDemand, err := s.onDemandInstances(ctx, workers)
		if err != nil {
			return snap, err
		}
		snap.Spot = estimateSpot(f, last, onDemand)
		for i := range snap.Workers {
			snap.Workers[i].OnDemand = onDemand[snap.Workers[i].InstanceID]
		}
	}
	runs, err := s.RecentRuns(ctx, fleet, now.Add(-RunWindow), ceilDiv(RunSamples, s.shardCount(fleet)))
	if err != nil {
		return snap, err
	}
	// Under "" every run of the fleet, for a workflow with none of its own.
	snap.RunTimes = make(map[string]eta.History, len(runs)+1)
	var all eta.History
	for wf, r := range runs {
		snap.RunTimes[wf] = r
		all = append(all, r...)
	}
	if len(all) > 0 {
		slices.Sort(all)
		snap.RunTimes[""] = all
	}
	snap.Boot = slices.Sorted(slices.Values(st.Boots))
	return snap, nil
}

// estimateWorkers are the workers as a projection sees them, and the
// instances: each the scaler saw (firstSeen), in service when a worker
// registered from it, booting otherwise; each other machine a worker
// registered from (seen by no tick yet, or started by hand), in service;
// and the launches the desired capacity asks for beyond them, booting
// since askedAt, when the decision that set it (a wake on enqueue, or a
// tick) asked for them.
func estimateWorkers(ws []worker.Worker, firstSeen map[string]time.Time, desired int, askedAt time.Time) ([]eta.Worker, []scaling.Instance) {
	out := make([]eta.Worker, 0, len(ws))
	registered := map[string]bool{}
	for _, w := range ws {
		out = append(out, eta.Worker{
			Worker: scaling.Worker{ID: w.ID, InstanceID: w.InstanceID, Leases: w.Leases, Draining: w.Status != worker.Active,
				LastSeen: w.LastSeenAt, IdleSince: w.IdleSince()},
			Pending: !w.Approved,
		})
		if w.InstanceID != "" {
			registered[w.InstanceID] = true
		}
	}
	var insts []scaling.Instance
	for id, seen := range firstSeen {
		state := scaling.StatePending
		if registered[id] {
			state = scaling.StateInService
		}
		insts = append(insts, scaling.Instance{ID: id, LifecycleState: state, FirstSeen: seen})
	}
	for id := range registered {
		if _, seen := firstSeen[id]; !seen {
			insts = append(insts, scaling.Instance{ID: id, LifecycleState: scaling.StateInService})
		}
	}
	slices.SortFunc(insts, func(a, b scaling.Instance) int { return cmp.Compare(a.ID, b.ID) })
	for i := len(insts); i < desired; i++ {
		insts = append(insts, scaling.Instance{ID: fmt.Sprintf("asked-%d", i), LifecycleState: scaling.StatePending, FirstSeen: askedAt})
	}
	return out, insts
}

// estimateSpot is a fleet's Spot group beside its On-Demand one as the
// last tick recorded it (its ladder inputs): how long Spot had been short
// then and each group's desired capacity; onDemand are the instances whose
// workers registered On-Demand (one still booting is counted with Spot's).
// The type and zone Spot refused are not recorded.
func estimateSpot(f *fleetconfig.Fleet, last fleetstate.Decision, onDemand map[string]bool) *eta.Spot {
	l := last.Inputs.Ladder
	sp := &eta.Spot{After: f.OnDemand.FallbackAfter.Std(), WaitSLO: f.OnDemand.WaitSLO.Std(), OnDemand: onDemand,
		SpotDesired: l.SpotDesired, OnDemandDesired: l.OnDemandDesired}
	if l.SpotShortSeconds > 0 {
		sp.ShortSince = last.At.Add(-time.Duration(l.SpotShortSeconds) * time.Second)
	}
	return sp
}

// onDemandInstances are the instances of the workers registered On-Demand.
// The listing leaves the purchase option out, so each worker is read once
// per process (it never changes) and remembered.
func (s *Store) onDemandInstances(ctx context.Context, ws []worker.Worker) (map[string]bool, error) {
	out := map[string]bool{}
	for _, w := range ws {
		od, known := s.onDemand.Load(w.ID)
		if !known {
			full, err := s.GetWorker(ctx, w.ID)
			if errors.Is(err, ErrNotFound) {
				continue // gone since the listing
			}
			if err != nil {
				return nil, err
			}
			od = full.PurchaseOption == cost.OnDemand
			s.onDemand.Store(w.ID, od)
		}
		if od.(bool) && w.InstanceID != "" {
			out[w.InstanceID] = true
		}
	}
	return out, nil
}

// FleetQueue reads a fleet's live jobs one by one: the head of its queued
// jobs, at most limit of them in queue order (readQueueHead), and the
// leased jobs with their workers and lease times. complete reports whether
// the queued are all of them. One index query per shard of the ready and
// leased partitions and at most one of the delayed; the queued read is
// bounded by limit, the leased by the fleet's slots.
func (s *Store) FleetQueue(ctx context.Context, fleet string, limit int) (queued []eta.Queued, running []eta.Running, complete bool, err error) {
	if queued, complete, err = s.readQueueHead(ctx, fleet, limit); err != nil {
		return nil, nil, false, err
	}
	leased, err := s.readShards(ctx, s.shardPartitions(prefixLeased, fleet), "", "", 0, true)
	if err != nil {
		return nil, nil, false, err
	}
	running = make([]eta.Running, 0, len(leased))
	for _, it := range leased {
		running = append(running, eta.Running{JobID: it.JobID, TenantID: it.TenantID, WorkflowID: it.WorkflowID,
			WorkerID: it.WorkerID, LeasedAt: fromMS(it.LeasedMS), OnDemandOnly: it.OnDemandOnly})
	}
	return queued, running, complete, nil
}

// readQueueHead reads the first of a fleet's queued jobs in queue order,
// at most limit (0: all): ready ones by priority then age, then those
// waiting out a backoff by when they are due, as eta.Project follows
// them. Each ready shard is read to its share of limit (one query each,
// ceil(limit/shards) items); the merge is the queue's head up to the
// first shard that had more than its share, where it is cut, so no job
// is left out before the last one answered. The delayed partition is read
// (to what limit leaves) only when the ready queue was read whole. It
// reads at most limit + shards items; complete reports whether the
// answer is every queued job.
func (s *Store) readQueueHead(ctx context.Context, fleet string, limit int) ([]eta.Queued, bool, error) {
	parts := s.readyPartitions(fleet)
	share := 0
	if limit > 0 {
		share = ceilDiv(limit, len(parts))
	}
	limits := make([]int, len(parts))
	for i := range limits {
		limits[i] = share
	}
	var heads [][]jobItem
	var err error
	if share > 0 {
		heads, err = s.readShardHeads(ctx, fleet, limits)
	} else {
		var all []jobItem
		all, err = s.readReady(ctx, fleet, 0)
		heads = [][]jobItem{all}
	}
	if err != nil {
		return nil, false, err
	}
	var ready []jobItem
	cutAt, cut := "", false
	for _, h := range heads {
		ready = append(ready, h...)
		if share > 0 && len(h) >= share && (!cut || h[len(h)-1].GSI1SK < cutAt) {
			cutAt, cut = h[len(h)-1].GSI1SK, true
		}
	}
	inQueueOrder(ready)
	if cut {
		n := 0
		for n < len(ready) && ready[n].GSI1SK <= cutAt {
			n++
		}
		ready = ready[:n]
	}
	if limit > 0 && len(ready) > limit {
		ready, cut = ready[:limit], true
	}
	queued := make([]eta.Queued, 0, len(ready))
	for i := range ready {
		queued = append(queued, eta.Queued{Candidate: estimateCandidate(&ready[i])})
	}
	if cut {
		return queued, false, nil
	}
	rest := 0
	if limit > 0 {
		if rest = limit - len(ready); rest == 0 {
			return queued, false, nil
		}
	}
	delayed, err := s.queryIndex(ctx, delayedPartition(fleet), "", rest, true)
	if err != nil {
		return nil, false, err
	}
	for i := range delayed {
		queued = append(queued, eta.Queued{Candidate: estimateCandidate(&delayed[i]), NotBefore: fromMS(delayed[i].NotBeforeMS)})
	}
	return queued, limit == 0 || len(delayed) < rest, nil
}

// estimateCandidate is a queued job as the lease planner sees it, without
// the claim's handle: an estimate never claims.
func estimateCandidate(it *jobItem) lease.Candidate {
	c := candidate(it)
	c.Ref = nil
	return c
}

// RecentRuns reads the run times of a fleet's jobs that succeeded at or
// after since, by workflow, each sorted: at most perShard of the newest of
// each shard of the succeeded partition (one query per shard), so the
// read is bounded however many jobs the window holds.
func (s *Store) RecentRuns(ctx context.Context, fleet string, since time.Time, perShard int) (map[string][]time.Duration, error) {
	ok, err := s.readShards(ctx, s.terminalPartitions(fleet, job.Succeeded), sortTime(since), "", perShard, false)
	if err != nil {
		return nil, err
	}
	runs := map[string][]time.Duration{}
	for _, it := range ok {
		if it.LeasedMS > 0 && it.UpdatedMS >= it.LeasedMS {
			runs[it.WorkflowID] = append(runs[it.WorkflowID], time.Duration(it.UpdatedMS-it.LeasedMS)*time.Millisecond)
		}
	}
	for _, r := range runs {
		slices.Sort(r)
	}
	return runs, nil
}
