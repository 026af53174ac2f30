package lease

import (
	"slices"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fairshare"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// Candidate is a queued job a poll may lease, as the ready queue shows it.
type Candidate struct {
	JobID, TenantID, WorkflowID string
	Priority                    int
	// Created is when the job was queued (age order within a priority).
	Created time.Time
	// OnDemandOnly: the job reached its preemption cap and only an
	// On-Demand worker may lease it.
	OnDemandOnly bool
	// Entry names this entry of the job in the queue (its last change, as
	// the index shows it): a job given back to the queue is a new entry.
	// The planner remembers entries it lost a claim on (Memory).
	Entry string
	// RunTimeout bounds each attempt's run (0: none); the lease terms
	// never outlive it.
	RunTimeout time.Duration
	// QueueDeadline is when a never-leased job outwaits its queue timeout
	// (zero: none); past it the job is ended, not claimed.
	QueueDeadline time.Time
	// Ref is the source's own handle on the job, handed back with the
	// claim (the planner never reads it).
	Ref any
}

// Worker is the poller as the rule sees it.
type Worker struct {
	// Workflows are the workflows it serves.
	Workflows []string
	// OnDemand: its purchase option is On-Demand (it may lease pinned jobs,
	// and tries them first).
	OnDemand bool
	// Full: it holds max_concurrency leases already, as far as the caller
	// knows (the store's claim checks it again).
	Full bool
}

// Tenants is the stage's tenants as one poll sees them.
type Tenants struct {
	// FairShare: the stage lists tenants, so the top priority is ordered
	// by the fair-share rule.
	FairShare bool
	// Leased is each tenant's leased jobs in the fleet (the census). It is
	// needed only when NeedsCensus says so.
	Leased map[string]int
	// Settings answers a tenant's weight and max_leased.
	Settings func(id string) fleetconfig.Tenant
}

// Shuffle permutes n elements with swap, as math/rand's Shuffle does.
type Shuffle func(n int, swap func(i, j int))

// Order answers the candidates (given in priority-then-age order, as the
// ready queue holds them) in the order a poll tries to claim them:
//
//  1. only those the worker may lease (Leasable);
//  2. with fair share, the top priority's jobs merged tenant by tenant as
//     successive fair-share picks would lease them (fairshare.Pick, given
//     the census), tenants at their max_leased last; lower priorities as
//     they were;
//  3. the first `spread` jobs of the top priority shuffled, so concurrent
//     pollers reading the same head mostly try different jobs (1 keeps
//     strict order);
//  4. for an On-Demand worker, pinned jobs first within their priority.
//
// The answer may share cands' array. A full worker gets nothing to try.
// The claim still checks every condition: a tenant's cap, the worker's
// state, the job's.
func Order(cands []Candidate, w Worker, t Tenants, spread int, shuffle Shuffle) []Candidate {
	if w.Full {
		return nil
	}
	out := cands // not copied when the worker may lease each
	if slices.ContainsFunc(cands, func(c Candidate) bool { return !leasable(c, w) }) {
		out = Leasable(cands, w)
	}
	if t.FairShare && NeedsCensus(out, t) {
		n := topCount(out)
		out = append(fairMerge(out[:n], t.Leased, t.Settings), out[n:]...)
	}
	out = spreadTop(out, spread, shuffle)
	if w.OnDemand {
		out = pinnedFirst(out)
	}
	return out
}

// Leasable keeps the candidates the worker may lease: of a workflow it
// serves, and pinned to On-Demand only when it is On-Demand. The order is
// kept.
func Leasable(cands []Candidate, w Worker) []Candidate {
	out := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if leasable(c, w) {
			out = append(out, c)
		}
	}
	return out
}

func leasable(c Candidate, w Worker) bool {
	return slices.Contains(w.Workflows, c.WorkflowID) && (w.OnDemand || !c.OnDemandOnly)
}

// Pinned reports whether any candidate is pinned to On-Demand: only then
// does the worker's purchase option matter.
func Pinned(cands []Candidate) bool {
	return slices.ContainsFunc(cands, func(c Candidate) bool { return c.OnDemandOnly })
}

// NeedsCensus reports whether ordering the (leasable) candidates needs the
// tenants' census: fair share is on and the top priority holds jobs of two
// tenants or more.
func NeedsCensus(cands []Candidate, t Tenants) bool {
	return t.FairShare && len(cands) > 0 && !oneTenant(cands[:topCount(cands)])
}

// OneTenantAtTop reports whether every candidate is of one priority and one
// tenant. A read that stopped at its limit with such candidates may have
// missed the other tenants' jobs of that priority behind this tenant's
// backlog: with fair share the caller reads them too and adds them.
func OneTenantAtTop(cands []Candidate) (tenant string, priority int, ok bool) {
	if len(cands) == 0 || topCount(cands) != len(cands) || !oneTenant(cands) {
		return "", 0, false
	}
	return cands[0].TenantID, cands[0].Priority, true
}

// topCount is how many candidates share the first one's priority.
func topCount(cands []Candidate) int {
	n := 0
	for n < len(cands) && cands[n].Priority == cands[0].Priority {
		n++
	}
	return n
}

func oneTenant(cands []Candidate) bool {
	for _, c := range cands {
		if c.TenantID != cands[0].TenantID {
			return false
		}
	}
	return true
}

// fairMerge orders jobs of one priority (each tenant's in age order) as
// successive fair-share picks would lease them, given each tenant's leased
// jobs. Jobs of tenants at their max_leased (as far as the census knows)
// come last, oldest first: other tenants' jobs are tried before them.
func fairMerge(head []Candidate, leased map[string]int, settings func(string) fleetconfig.Tenant) []Candidate {
	// Each tenant's jobs are a chain through next (-1 ends it; taken marks
	// a job merged) from its first not yet merged; a tenant is found by a
	// scan of those seen (a head holds few tenants).
	const taken = -2
	ts := make([]fairshare.Tenant, 0, min(len(head), 8))
	type chain struct{ first, last int }
	chains := make([]chain, 0, cap(ts))
	next := make([]int, len(head))
	for k, c := range head {
		next[k] = -1
		i := slices.IndexFunc(ts, func(t fairshare.Tenant) bool { return t.ID == c.TenantID })
		if i < 0 {
			var s fleetconfig.Tenant
			if settings != nil {
				s = settings(c.TenantID)
			}
			i = len(ts)
			ts = append(ts, fairshare.Tenant{ID: c.TenantID, Weight: s.Weight, MaxLeased: s.MaxLeased, Leased: leased[c.TenantID], OldestReady: c.Created})
			chains = append(chains, chain{k, k})
		} else {
			next[chains[i].last], chains[i].last = k, k
		}
		ts[i].Ready++
	}
	out := make([]Candidate, 0, len(head))
	for {
		i := fairshare.Pick(ts)
		if i < 0 {
			break
		}
		k := chains[i].first
		out = append(out, head[k])
		chains[i].first, next[k] = next[k], taken
		ts[i].Leased++
		ts[i].Ready--
		if f := chains[i].first; f >= 0 {
			ts[i].OldestReady = head[f].Created
		}
	}
	for k, c := range head {
		if next[k] != taken {
			out = append(out, c)
		}
	}
	return out
}

// spreadTop shuffles the first `spread` candidates of the top priority and
// keeps the rest in order. Priority order is kept: only jobs of the highest
// priority present are shuffled, and only the first `spread` of them.
func spreadTop(cands []Candidate, spread int, shuffle Shuffle) []Candidate {
	if len(cands) < 2 || spread < 2 || shuffle == nil {
		return cands
	}
	top := min(topCount(cands), spread)
	out := slices.Clone(cands)
	shuffle(top, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// pinnedFirst moves the pinned candidates ahead of the others of the same
// priority, keeping the order otherwise: the On-Demand capacity the scaler
// launched for them is theirs before anyone else's.
func pinnedFirst(cands []Candidate) []Candidate {
	out := slices.Clone(cands)
	slices.SortStableFunc(out, func(a, b Candidate) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		switch {
		case a.OnDemandOnly == b.OnDemandOnly:
			return 0
		case a.OnDemandOnly:
			return -1
		default:
			return 1
		}
	})
	return out
}
