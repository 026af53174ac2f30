package lease

import (
	"cmp"
	"slices"
	"time"
)

// Terms are what a claim writes: the lease and the tenant's slot.
type Terms struct {
	// Now is the claim's time (the job's history entry, the worker's last
	// claim).
	Now time.Time
	// Expires is when the lease runs out without a heartbeat.
	Expires time.Time
	// RunDeadline is when the attempt overruns its run timeout (zero: no
	// timeout); heartbeats extend the lease up to it and no further.
	RunDeadline time.Time
	// Slot is the tenant's max_leased when the claim takes one of its
	// leased slots (0: the tenant has no cap).
	Slot int
}

// TermsFor are the terms of a claim of c at now: a lease of leaseFor that
// never outlives the attempt's run time, and a slot of the tenant's cap.
func TermsFor(c Candidate, now time.Time, leaseFor time.Duration, slot int) Terms {
	t := Terms{Now: now, Expires: now.Add(leaseFor), Slot: slot}
	if c.RunTimeout > 0 {
		t.RunDeadline = now.Add(c.RunTimeout)
		if t.RunDeadline.Before(t.Expires) {
			t.Expires = t.RunDeadline
		}
	}
	return t
}

// Attempt is one claim a poll may try, in the plan's order.
type Attempt struct {
	Candidate
	Terms Terms
}

// Plan is what a poll does with one read of candidates.
type Plan struct {
	// Attempts are the claims to try, in order.
	Attempts []Attempt
	// Expired are the candidates past their queue deadline: ended, not
	// claimed.
	Expired []Candidate
}

// Inputs are everything a plan is made from.
type Inputs struct {
	// Candidates in queue order (InQueueOrder).
	Candidates []Candidate
	Worker     Worker
	Tenants    Tenants
	// Spread is how many of the top priority's first jobs are shuffled.
	Spread  int
	Shuffle Shuffle
	Now     time.Time
	// LeaseFor is the fleet's lease duration.
	LeaseFor time.Duration
	// Cap answers a tenant's max_leased (0: none; nil: no caps).
	Cap func(tenant string) int
	// Taken reports a candidate another poller is known to hold (nil:
	// none is).
	Taken func(Candidate) bool
}

// MakePlan decides, without reading or writing anything, what a poll does
// with the candidates it read: it leaves out the ones another poller is
// known to hold, sets aside those past their queue deadline, orders the
// rest by the lease rule (Order) and gives each its terms.
func MakePlan(in Inputs) Plan {
	live, expired := Skip(in.Candidates, in.Now, in.Taken)
	p := Plan{Expired: expired}
	for _, c := range Order(live, in.Worker, in.Tenants, in.Spread, in.Shuffle) {
		slot := 0
		if in.Cap != nil {
			slot = in.Cap(c.TenantID)
		}
		p.Attempts = append(p.Attempts, Attempt{Candidate: c, Terms: TermsFor(c, in.Now, in.LeaseFor, slot)})
	}
	return p
}

// Skip splits candidates into those a poll may try and those past their
// queue deadline, leaving out those another poller is known to hold
// (taken may be nil). The order is kept.
func Skip(cands []Candidate, now time.Time, taken func(Candidate) bool) (live, expired []Candidate) {
	live = make([]Candidate, 0, len(cands))
	for _, c := range cands {
		switch {
		case taken != nil && taken(c):
		case QueueExpired(c, now):
			expired = append(expired, c)
		default:
			live = append(live, c)
		}
	}
	return live, expired
}

// QueueExpired reports whether a candidate has outwaited its queue
// deadline.
func QueueExpired(c Candidate, now time.Time) bool {
	return !c.QueueDeadline.IsZero() && !c.QueueDeadline.After(now)
}

// InQueueOrder sorts candidates as the ready queue holds them: highest
// priority, then oldest, then by id.
func InQueueOrder(cands []Candidate) {
	slices.SortStableFunc(cands, QueueCompare)
}

// QueueCompare orders two candidates as the queue does: highest priority,
// then oldest, then by id.
func QueueCompare(a, b Candidate) int {
	if a.Priority != b.Priority {
		return b.Priority - a.Priority
	}
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.JobID, b.JobID)
}
