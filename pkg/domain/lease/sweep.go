package lease

import (
	"context"
	"time"
)

// Housekeeping is the storage's side of the sweeper's steps. Each step
// works on at most limit jobs (0: every one due), and each answers what it
// did; a step's writes are conditioned, so two sweeps at once (the tick
// and a poll) change each job once.
type Housekeeping interface {
	// PromoteDue moves retries whose backoff has passed into the ready
	// queue and answers them.
	PromoteDue(ctx context.Context, fleet string, limit int, now time.Time) ([]Candidate, error)
	// ExpireLeases ends run-out leases (the attempt is spent; the job is
	// queued again, waits out a run timeout's backoff, or is dead) and
	// answers the jobs it made ready to lease now, as each was written.
	ExpireLeases(ctx context.Context, fleet string, limit int, now time.Time) (ready []Candidate, r Expired, err error)
	// ExpireQueueDeadlines ends never-leased jobs past their queue
	// deadline and answers how many.
	ExpireQueueDeadlines(ctx context.Context, fleet string, now time.Time) (int, error)
}

// Expired counts what the expiry of run-out leases did.
type Expired struct {
	// Requeued: queued again (ready at once, or after a backoff).
	Requeued int
	// Dead: no attempt left.
	Dead int
}

// Swept is what one sweep of a fleet did.
type Swept struct {
	// Promoted retries, now ready.
	Promoted int
	// QueueExpired jobs, dead with reason queue_timeout.
	QueueExpired int
	// Leases that ran out.
	Leases Expired
}

// Sweeper owns the housekeeping that moves a fleet's jobs along on time:
// promotion of due retries, expiry of run-out leases and of queue
// deadlines. The scaler's tick runs every step on every job due, once a
// minute (Sweep), so jobs move on time while no worker polls; a poll that
// finds nothing ready runs the first two on a few jobs (Reclaim), so a
// retry or a lost lease is leased again within a poll's time rather than
// a minute's. Both go through these steps and nothing else does.
type Sweeper struct {
	H Housekeeping
}

// Sweep runs every step on every job due of the fleet.
func (s Sweeper) Sweep(ctx context.Context, fleet string, now time.Time) (Swept, error) {
	var r Swept
	promoted, err := s.H.PromoteDue(ctx, fleet, 0, now)
	if r.Promoted = len(promoted); err != nil {
		return r, err
	}
	if r.QueueExpired, err = s.H.ExpireQueueDeadlines(ctx, fleet, now); err != nil {
		return r, err
	}
	_, r.Leases, err = s.H.ExpireLeases(ctx, fleet, 0, now)
	return r, err
}

// Reclaim runs the promotion and lease-expiry steps on up to limit jobs
// each and answers the jobs now ready to lease: the planner plans them as
// any other candidates. A run-timed-out job waiting out its backoff is not
// among them.
func (s Sweeper) Reclaim(ctx context.Context, fleet string, limit int, now time.Time) ([]Candidate, error) {
	back, err := s.H.PromoteDue(ctx, fleet, limit, now)
	if err != nil {
		return nil, err
	}
	ready, _, err := s.H.ExpireLeases(ctx, fleet, limit, now)
	return append(back, ready...), err
}
