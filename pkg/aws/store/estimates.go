package store

import (
	"context"
	"slices"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

// Reads for a queued job's estimate (GET /api/jobs/{job_id}): the fleet's
// live jobs one by one and its recent run times per workflow. Their cost
// follows the live backlog and a bounded window of finished jobs, never
// the fleet's history (docs/data-model.md, "Estimates").

// FleetQueue reads a fleet's live jobs: the ready queue in queue order
// (every shard), the jobs waiting out a backoff, the leased jobs. Three
// index queries per shard, each bounded by the live backlog.
func (s *Store) FleetQueue(ctx context.Context, fleet string) (fleetstate.Queue, error) {
	var q fleetstate.Queue
	ready, err := s.readReady(ctx, fleet, 0)
	if err != nil {
		return q, err
	}
	q.Ready = candidates(ready)
	for i := range q.Ready {
		q.Ready[i].Ref = nil // the claim's handle: an estimate never claims
	}
	delayed, err := s.queryIndex(ctx, delayedPartition(fleet), "", 0, true)
	if err != nil {
		return q, err
	}
	for i := range delayed {
		c := candidate(&delayed[i])
		c.Ref = nil
		q.Delayed = append(q.Delayed, fleetstate.Delayed{Candidate: c, Due: fromMS(delayed[i].NotBeforeMS)})
	}
	leased, err := s.readShards(ctx, s.shardPartitions(prefixLeased, fleet), "", "", 0, true)
	if err != nil {
		return q, err
	}
	for _, it := range leased {
		q.Leased = append(q.Leased, fleetstate.Running{JobID: it.JobID, TenantID: it.TenantID, WorkflowID: it.WorkflowID,
			WorkerID: it.WorkerID, LeasedAt: fromMS(it.LeasedMS)})
	}
	return q, nil
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
