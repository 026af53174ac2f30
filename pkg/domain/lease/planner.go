package lease

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

// Result is what one claim came to.
type Result int

const (
	// Claimed: the job is leased to the worker.
	Claimed Result = iota + 1
	// Taken: the job was no longer ready when the claim was written
	// (another poller leased it, or it was canceled or moved); the index
	// still shows it until it catches up.
	Taken
	// Conflict: the claim lost a race it may win if tried again (a
	// transaction conflict), or the lease was already over when read back.
	Conflict
	// WorkerRefused: the worker may not lease now (draining, unapproved,
	// at its max_concurrency).
	WorkerRefused
	// TenantFull: the job's tenant is at its max_leased.
	TenantFull
	// Ambiguous: the claim's outcome could not be settled (the storage gave
	// up on it, and it was undone or never committed); it comes with the
	// error.
	Ambiguous
)

var resultNames = map[Result]string{Claimed: "claimed", Taken: "taken", Conflict: "conflict", WorkerRefused: "worker refused", TenantFull: "tenant full", Ambiguous: "ambiguous"}

func (r Result) String() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// Claim is what the storage answers for one claim.
type Claim struct {
	Result Result
	// Job is the leased job, as read under the claim's own lease (Claimed).
	Job job.Job
}

// Source is the storage a planner leases from, for one polling worker. It
// reads and writes what it is asked and decides nothing: which job, in
// which order, on which terms is the planner's.
type Source interface {
	// Shards is how many shards the fleet's ready queue is spread over.
	Shards(fleet string) int
	// ReadReady reads the head of the fleet's ready queue's shards, at
	// once: at most limits[i] candidates of shard i (one limit per shard;
	// 0 skips the shard), each shard's in queue order.
	ReadReady(ctx context.Context, fleet string, limits []int) ([][]Candidate, error)
	// ReadOthersAtTop reads up to limit jobs of one priority of tenants
	// other than skip, in queue order.
	ReadOthersAtTop(ctx context.Context, fleet string, priority int, skip string, limit int) ([]Candidate, error)
	// ReadCensus reads the fleet's leased jobs per tenant.
	ReadCensus(ctx context.Context, fleet string) (map[string]int, error)
	// ReadOnDemand reads whether a worker's purchase option is On-Demand.
	ReadOnDemand(ctx context.Context, workerID string) (bool, error)
	// EndQueueExpired ends a job that outwaited its queue deadline (a
	// claim that won the race keeps it).
	EndQueueExpired(ctx context.Context, c Candidate, now time.Time) error
	// Claim writes one claim, as one transaction with the worker's and the
	// tenant's conditions. An error is a failure the poll answers.
	Claim(ctx context.Context, a Attempt) (Claim, error)
	// Reclaim runs the sweeper's steps on a few of the fleet's jobs (due
	// retries, run-out leases) and answers those ready to lease now.
	Reclaim(ctx context.Context, fleet string, limit int, now time.Time) ([]Candidate, error)
	// Idle notes that the worker polled and got nothing.
	Idle(ctx context.Context) error
}

// Poll is one worker's request for a job.
type Poll struct {
	WorkerID, Fleet string
	// Workflows are the workflows the worker serves.
	Workflows []string
	// LeaseFor is the fleet's lease duration.
	LeaseFor time.Duration
}

// Options configure a Planner.
type Options struct {
	// Limit is how many candidates a poll reads while claims are not being
	// lost (default 100); the window grows to MaxWindowLimits of them.
	Limit int
	// Spread is the narrowest window (default 8; 1 keeps strict order).
	Spread int
	// Rereads is how many times a poll reads again after losing a claim
	// (default 4); each read doubles the window.
	Rereads int
	// CensusTTL is how long a fleet's census and other tenants' jobs are
	// reused (default 1 s; negative: read for every poll that needs them).
	CensusTTL time.Duration
	// Tenants: nil when the stage lists none (no fair share, no caps);
	// else a tenant's settings (weight, max_leased).
	Tenants func(id string) fleetconfig.Tenant
	// Now is the clock.
	Now func() time.Time
	// Shuffle spreads the window (nil: strict order).
	Shuffle Shuffle
	// Pick answers a number in [0, n): the shard a contended poll reads
	// (default: at random).
	Pick func(n int) int
}

// MaxWindowLimits is the widest lease window in candidate limits.
const MaxWindowLimits = 4

// Planner decides who gets a GPU: which job a polling worker claims, in
// which order it tries them, on which terms, and when to read again. It
// owns the round loop, the window and the process's Memory; the Source
// only reads and writes. The store and the simulator run the same Planner.
type Planner struct {
	o         Options
	mem       Memory
	claims    atomic.Int64
	conflicts atomic.Int64
}

// NewPlanner returns a planner with o's defaults filled in.
func NewPlanner(o Options) *Planner {
	if o.Limit <= 0 {
		o.Limit = 100
	}
	if o.Spread <= 0 {
		o.Spread = 8
	}
	if o.Rereads <= 0 {
		o.Rereads = 4
	}
	if o.CensusTTL == 0 {
		o.CensusTTL = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Pick == nil {
		o.Pick = rand.IntN
	}
	return &Planner{o: o}
}

// Stats counts claims won and claims lost to another poller.
type Stats struct {
	Claims, Conflicts int64
}

// Stats answers the counts since the planner was made.
func (p *Planner) Stats() Stats { return Stats{Claims: p.claims.Load(), Conflicts: p.conflicts.Load()} }

// Window is the lease window now.
func (p *Planner) Window() int { return p.mem.windowOf(p.o.Spread) }

func (p *Planner) maxWindow() int { return MaxWindowLimits * p.o.Limit }

// Next leases one job to the polling worker, or answers ok false when
// there is none to lease now. Each round reads the ready queue's head
// (as wide as the window), plans, and claims: one claim per read, since
// a lost claim says the read is stale and the jobs next to the lost one
// are the likeliest to be gone too; each reread doubles the window, and
// the last tries every candidate in turn. When nothing is ready, the
// sweeper's steps run on a few jobs (due retries, run-out leases), and
// those are planned like any other candidates.
func (p *Planner) Next(ctx context.Context, src Source, poll Poll) (j job.Job, ok bool, err error) {
	for round := 0; round <= p.o.Rereads; round++ {
		now := p.o.Now()
		window := min(p.mem.windowOf(p.o.Spread)<<round, p.maxWindow())
		shards := max(1, src.Shards(poll.Fleet))
		one := shards > 1 && window > p.o.Spread
		cands, more, err := p.read(ctx, src, poll.Fleet, shards, window, one)
		if err != nil {
			return job.Job{}, false, err
		}
		plan, err := p.plan(ctx, src, poll, cands, more, window, now)
		if err != nil {
			return job.Job{}, false, err
		}
		r, err := p.claimFirst(ctx, src, poll, plan.Attempts, round < p.o.Rereads)
		if err == nil && one && !r.won && !r.lost && !r.refused {
			// Nothing in that shard this worker could take (none planned,
			// or each passed over at its tenant's cap): read them all.
			if cands, more, err = p.read(ctx, src, poll.Fleet, shards, window, false); err != nil {
				return job.Job{}, false, err
			}
			if plan, err = p.plan(ctx, src, poll, cands, more, window, now); err != nil {
				return job.Job{}, false, err
			}
			r, err = p.claimFirst(ctx, src, poll, plan.Attempts, round < p.o.Rereads)
		}
		if r.lost {
			p.mem.widen(p.o.Spread, p.maxWindow())
		} else if r.won {
			p.mem.narrow(p.o.Spread)
		}
		if err != nil || r.won {
			return r.job, r.won, err
		}
		if r.refused {
			break
		}
		if r.lost {
			continue
		}
		back, err := src.Reclaim(ctx, poll.Fleet, p.o.Limit, now)
		if err != nil {
			return job.Job{}, false, err
		}
		InQueueOrder(back)
		if plan, err = p.plan(ctx, src, poll, back, false, window, now); err != nil {
			return job.Job{}, false, err
		}
		if r, err = p.claimFirst(ctx, src, poll, plan.Attempts, false); err != nil || r.won {
			return r.job, r.won, err
		}
		break
	}
	return job.Job{}, false, src.Idle(ctx)
}

// read is one round's read of the ready queue, as many candidates as the
// window (at least the limit). While claims are not being lost it reads
// every shard's head at once and merges them: strict queue order. Under
// contention (one: the window widened past the spread) the candidates an
// index that lags behind still shows as ready are mostly taken, and every
// poll reading the same heads collides on them; a poll then reads the
// whole window from one shard picked at random, where a 1/shards share of
// the stale entries lie among as many candidates, and only the first job
// of each other shard, so that a higher priority anywhere is still seen.
// more reports whether a shard held more than was read.
func (p *Planner) read(ctx context.Context, src Source, fleet string, shards, window int, one bool) ([]Candidate, bool, error) {
	n := max(p.o.Limit, window)
	limits := make([]int, shards)
	own := -1
	if one {
		own = p.o.Pick(shards)
		for i := range limits {
			limits[i] = 1
		}
		limits[own] = n
	} else {
		for i := range limits {
			limits[i] = ceilDiv(n, shards)
		}
	}
	got, err := src.ReadReady(ctx, fleet, limits)
	if err != nil {
		return nil, false, err
	}
	var cands []Candidate
	more := false
	if one {
		cands, more = got[own], len(got[own]) >= n
		top := math.MinInt
		if len(cands) > 0 {
			top = cands[0].Priority
		}
		for i, g := range got {
			for _, c := range g {
				if i != own && c.Priority > top {
					cands = append(cands, c)
				}
			}
		}
	} else {
		for i, g := range got {
			cands = append(cands, g...)
			more = more || len(g) >= limits[i]
		}
	}
	if len(got) > 1 {
		InQueueOrder(cands)
	}
	return cands, more, nil
}

// plan ends the candidates past their queue deadline, reads what the lease
// rule needs of the worker and the tenants (only when it matters), and
// makes the plan.
func (p *Planner) plan(ctx context.Context, src Source, poll Poll, cands []Candidate, more bool, window int, now time.Time) (Plan, error) {
	in := Inputs{Candidates: cands, Worker: Worker{Workflows: poll.Workflows}, Spread: window, Shuffle: p.o.Shuffle,
		Now: now, LeaseFor: poll.LeaseFor, Taken: func(c Candidate) bool { return p.mem.taken.has(c, now) }}
	live, expired := Skip(cands, now, in.Taken)
	for _, c := range expired {
		if err := src.EndQueueExpired(ctx, c, now); err != nil {
			return Plan{}, err
		}
	}
	if Pinned(live) {
		od, err := p.onDemand(ctx, src, poll.WorkerID)
		if err != nil {
			return Plan{}, err
		}
		in.Worker.OnDemand = od
	}
	if p.o.Tenants != nil {
		in.Tenants = Tenants{FairShare: true, Settings: p.o.Tenants}
		in.Cap = func(id string) int { return p.o.Tenants(id).MaxLeased }
		fm := p.mem.fleet(poll.Fleet)
		if tenant, priority, one := OneTenantAtTop(Leasable(live, in.Worker)); more && one {
			// The read may have stopped short of everyone else's jobs.
			others, err := fm.othersAtTop(now, p.o.CensusTTL, priority, tenant, func() ([]Candidate, error) {
				return src.ReadOthersAtTop(ctx, poll.Fleet, priority, tenant, p.o.Limit)
			})
			if err != nil {
				return Plan{}, err
			}
			extra, _ := Skip(others, now, in.Taken)
			live = append(live, extra...)
		}
		if NeedsCensus(Leasable(live, in.Worker), in.Tenants) {
			leased, err := fm.census(now, p.o.CensusTTL, func() (map[string]int, error) { return src.ReadCensus(ctx, poll.Fleet) })
			if err != nil {
				return Plan{}, err
			}
			in.Tenants.Leased = leased
		}
	}
	// live is skipped already: the plan orders it and sets its terms.
	in.Candidates, in.Taken = live, nil
	return MakePlan(in), nil
}

func (p *Planner) onDemand(ctx context.Context, src Source, worker string) (bool, error) {
	if od, ok := p.mem.buyers.get(worker); ok {
		return od, nil
	}
	od, err := src.ReadOnDemand(ctx, worker)
	if err != nil {
		return false, err
	}
	p.mem.buyers.put(worker, od)
	return od, nil
}

type round struct {
	job     job.Job
	won     bool
	lost    bool
	refused bool
}

// claimFirst tries the attempts in order; with stopAtLost it stops at the
// first claim lost to another poller. The jobs of a tenant found at its
// max_leased are passed over.
func (p *Planner) claimFirst(ctx context.Context, src Source, poll Poll, attempts []Attempt, stopAtLost bool) (round, error) {
	var r round
	var full []string
	fm := p.mem.fleet(poll.Fleet)
	for _, a := range attempts {
		if slices.Contains(full, a.TenantID) {
			continue
		}
		c, err := src.Claim(ctx, a)
		if err != nil {
			return r, err
		}
		switch c.Result {
		case Claimed:
			p.claims.Add(1)
			fm.claimed(a.Candidate, true)
			r.job, r.won = c.Job, true
			return r, nil
		case TenantFull:
			full = append(full, a.TenantID)
			fm.full(a.TenantID, a.Terms.Slot)
		case WorkerRefused:
			r.refused = true
			return r, nil
		case Taken, Conflict:
			p.conflicts.Add(1)
			fm.claimed(a.Candidate, false)
			if c.Result == Taken {
				p.mem.taken.add(a.Candidate, a.Terms.Now)
			}
			r.lost = true
			if stopAtLost {
				return r, nil
			}
		default:
			return r, fmt.Errorf("claim of job %s: %v", a.JobID, c.Result)
		}
	}
	return r, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
