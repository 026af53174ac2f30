package sim

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/lease"
)

// The simulated fleet leases by the store's own planner (lease.Planner):
// the queue's order, jobs pinned to On-Demand only on On-Demand instances,
// with fair share the tenants' picks, a tenant at its max_leased passed
// over. Only the storage is the simulator's (waitingJobs): its reads answer the
// engine's state, and its claim takes the job unless the tenant is full.

// newPlanner is the engine's planner: strict order (no spread, nothing
// shuffled) and the census read for every poll, as the simulated state is
// exact.
func (e *engine) newPlanner() *lease.Planner {
	o := lease.Options{Spread: 1, CensusTTL: -1, Now: func() time.Time { return epoch.Add(e.now) }}
	if e.opt.FairShare {
		o.Tenants = func(id string) fleetconfig.Tenant {
			return fleetconfig.Tenant{ID: id, MaxLeased: e.opt.TenantMaxLeased}
		}
	}
	return lease.NewPlanner(o)
}

// nextFor is the index in the queue of the job a poll of the instance
// leases, -1 if none.
func (e *engine) nextFor(in *instance) int {
	q := &waitingJobs{e: e, in: in, chosen: -1}
	if _, ok, err := e.planner.Next(context.Background(), q, lease.Poll{WorkerID: strconv.Itoa(in.id), Workflows: e.workflows()}); err != nil || !ok {
		return -1
	}
	return q.chosen
}

// workflows are every workflow of the workload: the simulated fleet serves
// them all.
func (e *engine) workflows() []string {
	set := map[string]bool{}
	for _, j := range e.waiting {
		set[j.spec.Workflow] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// waitingJobs is the engine's waiting jobs as the planner's storage, for one
// instance's poll.
type waitingJobs struct {
	e      *engine
	in     *instance
	chosen int
}

func (q *waitingJobs) candidate(k int) lease.Candidate {
	j := q.e.waiting[k]
	return lease.Candidate{JobID: strconv.Itoa(k), TenantID: j.spec.Tenant, WorkflowID: j.spec.Workflow,
		Created: epoch.Add(j.spec.Arrival), OnDemandOnly: j.pinned, Ref: k}
}

func (q *waitingJobs) Shards(string) int { return 1 }

func (q *waitingJobs) ReadReady(_ context.Context, _ string, limits []int) ([][]lease.Candidate, error) {
	n := min(len(q.e.waiting), limits[0])
	out := make([]lease.Candidate, n)
	for k := range n {
		out[k] = q.candidate(k)
	}
	return [][]lease.Candidate{out}, nil
}

func (q *waitingJobs) ReadOthersAtTop(_ context.Context, _ string, _ int, skip string, limit int) ([]lease.Candidate, error) {
	var out []lease.Candidate
	for k, j := range q.e.waiting {
		if len(out) == limit {
			break
		}
		if j.spec.Tenant != skip {
			out = append(out, q.candidate(k))
		}
	}
	return out, nil
}

func (q *waitingJobs) ReadCensus(context.Context, string) (map[string]int, error) {
	return q.e.leasedByTenant(), nil
}

func (q *waitingJobs) ReadOnDemand(context.Context, string) (bool, error) { return q.in.onDemand, nil }

// EndQueueExpired: simulated jobs have no queue deadline.
func (q *waitingJobs) EndQueueExpired(context.Context, lease.Candidate, time.Time) error { return nil }

func (q *waitingJobs) Claim(_ context.Context, a lease.Attempt) (lease.Claim, error) {
	if a.Terms.Slot > 0 && q.e.leasedByTenant()[a.TenantID] >= a.Terms.Slot {
		return lease.Claim{Result: lease.TenantFull}, nil
	}
	q.chosen = a.Ref.(int)
	return lease.Claim{Result: lease.Claimed, Job: job.Job{ID: a.JobID}}, nil
}

// Reclaim: the engine requeues at once what the store's sweeper would.
func (q *waitingJobs) Reclaim(context.Context, string, int, time.Time) ([]lease.Candidate, error) {
	return nil, nil
}

func (q *waitingJobs) Idle(context.Context) error { return nil }
