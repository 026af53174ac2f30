package store

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// LeaseNext leases one job of the worker's fleet whose workflow it serves.
// Which job, in which order and on which terms is the lease planner's
// (lease.Planner, one per Store: per process): the store reads for it and
// executes one claim at a time (pollSource). The job claim and the worker's
// check (its token, not draining or revoked, approved, under
// max_concurrency, and its lease count) are one transaction, so a worker
// being drained as a scale-in victim can never get a lease in the same
// instant. ErrNoJob means nothing to lease now.
//
// A poll that took a lease hands it to its worker, or takes it back: after
// the claim transaction, the job is read consistently (retried), and the
// answer is the job as read under the claim's own lease token. When the
// SDK gave up on the claim itself (its answers lost), the same read tells
// whether it committed. When the read fails every time, the claim is undone
// in a transaction conditioned on its token (job ready again, attempt not
// spent, the worker's count back) and the poll answers the error: a 5xx
// from a poll changed nothing. When the read finds the lease already over
// (it ran out and was swept while the poll was slow), the poll moves on to
// another job rather than answer a lease it does not hold. When the poll's
// context ends after the claim (its caller gone), the claim is undone too.
// Only if the undo fails as well does a job stay leased to nobody, until
// its lease runs out.
func (s *Store) LeaseNext(ctx context.Context, a WorkerAuth, workflows []string) (job.Job, error) {
	f, err := s.fleet(a.Fleet)
	if err != nil {
		return job.Job{}, err
	}
	j, ok, err := s.planner.Next(ctx, pollSource{s: s, a: a}, lease.Poll{WorkerID: a.WorkerID, Fleet: f.Slug, Workflows: workflows, LeaseFor: f.LeaseDuration()})
	switch {
	case err != nil:
		return job.Job{}, err
	case !ok:
		return job.Job{}, ErrNoJob
	}
	return j, nil
}

// newPlanner is the store's lease planner: the store's candidate limit and
// spread, the stage's tenants (fair share and caps when it lists any).
func newPlanner(o Options) *lease.Planner {
	po := lease.Options{Limit: o.CandidateLimit, Spread: o.LeaseSpread, Now: o.Clock.Now, Shuffle: mrand.Shuffle}
	if o.Config != nil && len(o.Config.Tenants) > 0 {
		po.Tenants = o.Config.Tenant
	}
	return lease.NewPlanner(po)
}

// pollSource is the store as the lease planner sees it, for one polling
// worker: reads, one claim at a time, the sweeper's reclaim. It decides
// nothing.
type pollSource struct {
	s *Store
	a WorkerAuth
}

func (p pollSource) Shards(fleet string) int { return p.s.shardCount(fleet) }

func (p pollSource) ReadReady(ctx context.Context, fleet string, limits []int) ([][]lease.Candidate, error) {
	got, err := p.s.readShardHeads(ctx, fleet, limits)
	out := make([][]lease.Candidate, len(got))
	for i := range got {
		out[i] = candidates(got[i])
	}
	return out, err
}

func (p pollSource) ReadOthersAtTop(ctx context.Context, fleet string, priority int, skip string, limit int) ([]lease.Candidate, error) {
	items, err := p.s.othersAtTop(ctx, fleet, priority, skip, limit)
	return candidates(items), err
}

func (p pollSource) ReadCensus(ctx context.Context, fleet string) (map[string]int, error) {
	return p.s.leasedByTenant(ctx, fleet)
}

func (p pollSource) ReadOnDemand(ctx context.Context, workerID string) (bool, error) {
	w, err := p.s.GetWorker(ctx, workerID)
	return w.PurchaseOption == cost.OnDemand, err
}

func (p pollSource) EndQueueExpired(ctx context.Context, c lease.Candidate, now time.Time) error {
	_, err := p.s.expireQueued(ctx, itemOf(c), now)
	return err
}

func (p pollSource) Claim(ctx context.Context, at lease.Attempt) (lease.Claim, error) {
	return p.s.claim(ctx, p.a, itemOf(at.Candidate), at.Terms)
}

func (p pollSource) Reclaim(ctx context.Context, fleet string, limit int, now time.Time) ([]lease.Candidate, error) {
	return p.s.sweeper().Reclaim(ctx, fleet, limit, now)
}

func (p pollSource) Idle(ctx context.Context) error { return p.s.TouchWorker(ctx, p.a) }

// candidates are the jobs as the lease planner sees them; each carries its
// item (Ref) back to the claim.
func candidates(items []jobItem) []lease.Candidate {
	out := make([]lease.Candidate, len(items))
	for i := range items {
		out[i] = candidate(&items[i])
	}
	return out
}

func candidate(it *jobItem) lease.Candidate {
	c := lease.Candidate{JobID: it.JobID, TenantID: it.TenantID, WorkflowID: it.WorkflowID, Priority: it.Priority,
		Created: fromMS(it.CreatedMS), OnDemandOnly: it.OnDemandOnly,
		Entry:      fmt.Sprintf("%d|%d|%d", it.UpdatedMS, it.Attempts, it.Preemptions),
		RunTimeout: time.Duration(it.TimeoutS) * time.Second, Ref: it}
	if it.FirstLeasedMS == 0 && it.QueueTimeoutS > 0 {
		c.QueueDeadline = fromMS(it.CreatedMS + int64(it.QueueTimeoutS)*1000)
	}
	return c
}

func itemOf(c lease.Candidate) *jobItem { return c.Ref.(*jobItem) }

// claim writes one claim of the planner's on its terms, as one
// transaction, and answers what it came to.
func (s *Store) claim(ctx context.Context, a WorkerAuth, c *jobItem, t lease.Terms) (lease.Claim, error) {
	token := newToken()
	if t.Slot > 0 {
		token = slotTokenPrefix + token
	}
	now, exp := t.Now, t.Expires
	var runDeadline int64
	if !t.RunDeadline.IsZero() {
		runDeadline = ms(t.RunDeadline)
	}
	entry := job.HistoryEntry{At: now, From: job.Queued, To: job.Leased, Worker: a.WorkerID, Attempt: c.Attempts + 1}
	set := expression.Set(expression.Name(attrStatus), expression.Value(string(job.Leased))).
		Set(expression.Name(attrLeaseToken), expression.Value(token)).
		Set(expression.Name(attrLeaseAuth), expression.Value(a.TokenHash)).
		Set(expression.Name(attrLeaseExpiresMS), expression.Value(ms(exp))).
		Set(expression.Name(attrLeaseUntilMS), expression.Value(ms(exp))).
		Set(expression.Name(attrLeasedMS), expression.Value(ms(now))).
		Set(expression.Name(attrWorkerID), expression.Value(a.WorkerID)).
		Set(expression.Name(attrAttempts), expression.Plus(expression.Name(attrAttempts), expression.Value(1))).
		Set(expression.Name(attrUpdatedMS), expression.Value(ms(now))).
		Set(expression.Name(attrFirstLeasedMS), expression.IfNotExists(expression.Name(attrFirstLeasedMS), expression.Value(ms(now)))).
		Set(expression.Name(attrReason), expression.Value("")).
		Set(expression.Name(AttrGSI1PK), expression.Value(s.leasedPartition(a.Fleet, c.JobID))).
		Set(expression.Name(AttrGSI1SK), expression.Value(timeSortKey(exp, c.JobID))).
		Set(expression.Name(attrHistory), expression.ListAppend(expression.Name(attrHistory), expression.Value([]job.HistoryEntry{entry}))).
		Set(expression.Name(attrProgress), null()).
		Set(expression.Name(attrRunDeadlineMS), expression.Value(runDeadline)).
		Set(expression.Name(attrQueueDeadlineMS), expression.Value(0))
	cond := expression.Name(attrStatus).Equal(expression.Value(string(job.Queued))).
		And(s.inReadyQueue(a.Fleet)).
		And(queueDeadlineOpen(now))
	wpk, wsk := workerKey(a.WorkerID)
	wcond := authCond(a).
		And(expression.Name(attrWorkerStatus).Equal(expression.Value(string(worker.Active)))).
		And(expression.Name(attrApproved).Equal(expression.Value(true))).
		And(expression.Name(attrLeases).LessThan(expression.Name(attrMaxConcurrency)))
	wcond = onDemandCond(c, wcond)
	items := []txItem{
		{name: memberJob, update: &update{pk: c.PK, sk: c.SK, set: set, cond: cond}},
		{name: memberWorker, update: &update{pk: wpk, sk: wsk,
			set: expression.Set(expression.Name(attrLeases), expression.Plus(expression.Name(attrLeases), expression.Value(1))).
				Set(expression.Name(attrLastSeenMS), expression.Value(ms(now))).
				Set(expression.Name(attrLastClaimMS), expression.Value(ms(now))).
				Set(expression.Name(attrFirstClaimMS), expression.IfNotExists(expression.Name(attrFirstClaimMS), expression.Value(ms(now)))),
			cond: wcond,
		}},
	}
	if t.Slot > 0 {
		items = append(items, txItem{name: memberLeaseSlot, update: takeLeaseSlot(c.TenantID, t.Slot, now)})
	}
	err := s.transact(ctx, items...)
	var tf *txFailed
	var unsure error
	switch {
	case err == nil:
	case errors.As(err, &tf) && tf.only(memberLeaseSlot):
		return lease.Claim{Result: lease.TenantFull}, nil
	case errors.As(err, &tf) && tf.failed(memberWorker):
		// The worker may not lease: find out whether its token is bad or it
		// is just draining, unapproved or full.
		if _, aerr := s.Authorize(ctx, a); aerr != nil {
			return lease.Claim{Result: lease.WorkerRefused}, aerr
		}
		return lease.Claim{Result: lease.WorkerRefused}, nil
	case errors.As(err, &tf) && tf.failed(memberJob):
		return lease.Claim{Result: lease.Taken}, nil
	case errors.As(err, &tf) || errors.Is(err, ErrContention):
		// A conflict of transactions: the job may still be free.
		return lease.Claim{Result: lease.Conflict}, nil
	default:
		// The SDK gave up, but the claim may have committed before its
		// answers were lost: the read below tells.
		unsure = err
	}
	// What follows settles a claim that may have committed, so it runs to
	// the end even when the poll's caller has gone (a closed connection, a
	// function timing out): nobody would receive the lease, so it is undone.
	settle, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimSettleTime)
	defer cancel()
	it, rerr := s.readClaimed(settle, c.JobID)
	mine := rerr == nil && job.Status(it.Status) == job.Leased && it.LeaseToken == token
	switch {
	case mine && ctx.Err() == nil:
		return lease.Claim{Result: lease.Claimed, Job: it.toJob()}, nil
	case mine:
		rerr = fmt.Errorf("the poll ended before its answer: %w", ctx.Err())
	case rerr == nil && unsure != nil:
		// The claim never committed: nothing changed.
		return lease.Claim{Result: lease.Ambiguous}, fmt.Errorf("lease job %s: %w", c.JobID, unsure)
	case rerr == nil:
		// The lease is already over (it ran out and was swept, or the job
		// was canceled); whoever ended it gave the worker its count back.
		return lease.Claim{Result: lease.Conflict}, nil
	}
	// The lease cannot be handed over: take the claim back, attempt unspent.
	if uerr := s.undoClaim(settle, a, c, token, now); uerr != nil {
		return lease.Claim{Result: lease.Ambiguous}, fmt.Errorf("read leased job %s: %w; undo the claim: %w", c.JobID, rerr, uerr)
	}
	s.log.Warn("lease undone", "job_id", c.JobID, "worker_id", a.WorkerID, "err", rerr)
	return lease.Claim{Result: lease.Ambiguous}, fmt.Errorf("read leased job %s (claim undone): %w", c.JobID, rerr)
}

// claimSettleTime bounds reading back and, if need be, undoing a claim.
const claimSettleTime = 10 * time.Second

// claimReadTries is how many times a poll reads a job it claimed (each read
// with the SDK's own retries) before it gives the claim up.
const claimReadTries = 3

// readClaimed reads a job just claimed, consistently, retrying failures.
func (s *Store) readClaimed(ctx context.Context, id string) (*jobItem, error) {
	var err error
	for range claimReadTries {
		var it *jobItem
		if it, err = s.getJobItem(ctx, id); err == nil || errors.Is(err, ErrNotFound) || ctx.Err() != nil {
			return it, err
		}
	}
	return nil, err
}

// undoClaim puts back a job claimed under token as it was before the claim:
// ready again, the attempt not spent, the worker's lease count one less. The
// history keeps both entries (leased, then queued with lease_undone). It is
// conditioned on the lease token, so a claim that never committed, or a
// lease that already ended, is left alone.
func (s *Store) undoClaim(ctx context.Context, a WorkerAuth, c *jobItem, token string, now time.Time) error {
	leased := *c
	leased.Status, leased.Attempts, leased.LeaseToken = string(job.Leased), c.Attempts+1, token
	u := s.jobUpdate(change{it: &leased, to: job.Queued, reason: job.ReasonLeaseUndone, worker: a.WorkerID, keepCounters: true}, leaseHeld(token), now)
	u.set = u.set.Set(expression.Name(attrAttempts), expression.Minus(expression.Name(attrAttempts), expression.Value(1))).
		Set(expression.Name(attrFirstLeasedMS), expression.Value(c.FirstLeasedMS))
	err := s.releaseBySystem(ctx, u, a.WorkerID, now)
	if errors.Is(err, errConditionFailed) {
		return nil // never committed, or already ended by someone else
	}
	return err
}

// sweeper is the one owner of the housekeeping steps (lease.Sweeper): the
// scaler's tick runs them all (Sweep), a poll that found nothing ready a
// few (pollSource.Reclaim).
func (s *Store) sweeper() lease.Sweeper { return lease.Sweeper{H: housekeeping{s}} }

// Sweep runs every housekeeping step on every job of the fleet that is
// due: due retries promoted, queued jobs past their deadline ended,
// run-out leases ended.
func (s *Store) Sweep(ctx context.Context, fleet string) (lease.Swept, error) {
	return s.sweeper().Sweep(ctx, fleet, s.clock.Now())
}

// housekeeping is the store's side of the sweeper's steps.
type housekeeping struct{ s *Store }

// PromoteDue moves a fleet's retries whose backoff has passed (up to limit;
// 0: all) into the ready queue, so they are counted and ordered with the
// rest, and answers them as written.
func (h housekeeping) PromoteDue(ctx context.Context, fleet string, limit int, now time.Time) ([]lease.Candidate, error) {
	s := h.s
	due, err := s.queryIndex(ctx, delayedPartition(fleet), sortTime(now.Add(time.Millisecond)), limit, true)
	if err != nil {
		return nil, err
	}
	var out []jobItem
	for _, c := range due {
		pk, sk := s.readyPartition(fleet, c.JobID), readySortKey(c.Priority, fromMS(c.CreatedMS), c.JobID)
		err := s.updateItem(ctx, update{pk: c.PK, sk: c.SK,
			set: expression.Set(expression.Name(AttrGSI1PK), expression.Value(pk)).
				Set(expression.Name(AttrGSI1SK), expression.Value(sk)),
			cond: expression.Name(attrStatus).Equal(expression.Value(string(job.Queued))).
				And(expression.Name(AttrGSI1PK).Equal(expression.Value(delayedPartition(fleet)))).
				And(expression.Name(attrNotBeforeMS).LessThanEqual(expression.Value(ms(now)))),
		})
		if errors.Is(err, errConditionFailed) {
			continue // promoted, leased or canceled meanwhile
		}
		if err != nil {
			return candidates(out), err
		}
		c.GSI1PK, c.GSI1SK = pk, sk
		out = append(out, c)
	}
	return candidates(out), nil
}

// ExpireQueueDeadlines expires a fleet's queued jobs that outwaited their
// queue timeout, so they end on time even when no worker polls. It reads
// the ready queue only: a job waiting out a retry backoff was leased before.
func (h housekeeping) ExpireQueueDeadlines(ctx context.Context, fleet string, now time.Time) (int, error) {
	items, err := h.s.readReady(ctx, fleet, 0)
	if err != nil {
		return 0, err
	}
	_, expired := lease.Skip(candidates(items), now, nil)
	n := 0
	for _, c := range expired {
		ok, err := h.s.expireQueued(ctx, itemOf(c), now)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// ExpireLeases ends up to limit (0: every) run-out leases of a fleet, and
// answers the jobs queued again that may be leased now (not those a run
// timeout's backoff filed among the delayed retries), each as its expiry
// wrote it: a reclaimed job is read once, by the expiry.
func (h housekeeping) ExpireLeases(ctx context.Context, fleet string, limit int, now time.Time) (ready []lease.Candidate, r lease.Expired, err error) {
	s := h.s
	parts := s.shardPartitions(prefixLeased, fleet)
	perShard := 0
	if limit > 0 {
		perShard = ceilDiv(limit, len(parts))
	}
	expired, err := s.readShards(ctx, parts, "", sortTime(now.Add(time.Millisecond)), perShard, true)
	if err != nil {
		return nil, r, err
	}
	for _, c := range expired {
		to, back, err := s.expireLease(ctx, c.JobID, c.LeaseToken, now)
		if err != nil {
			return ready, r, err
		}
		switch to {
		case job.Queued:
			r.Requeued++
			if back != nil {
				ready = append(ready, candidate(back))
			}
		case job.Dead:
			r.Dead++
		}
	}
	return ready, r, nil
}

// expireLease ends one lease if it has really run out (read consistently, the
// index only pointed at it). It answers the status the job moved to, or ""
// when there was nothing to do, and the job as written when it may be
// leased now (a run timeout's backoff may have filed it among the delayed
// retries).
func (s *Store) expireLease(ctx context.Context, id, token string, now time.Time) (job.Status, *jobItem, error) {
	it, err := s.getJobItem(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	j := it.toJob()
	if j.LeaseToken != token {
		return "", nil, nil
	}
	if !job.LeaseExpired(j, now) {
		// Heartbeats extended it past the expiry the index files it under.
		return "", nil, s.refileLease(ctx, it, now)
	}
	if it.RunDeadlineMS > 0 && it.RunDeadlineMS <= ms(now) {
		// The lease ran out at the run deadline: the attempt overran.
		return s.expireRun(ctx, it, now)
	}
	o := job.AfterLeaseExpiry(j)
	c := change{it: it, full: true, to: o.Status, reason: job.ReasonLeaseExpired, attempts: o.Attempts, preemptions: o.Preemptions, worker: j.WorkerID}
	if o.Status == job.Dead {
		c.jobErr = &job.Error{Code: string(job.ReasonLeaseExpired), Message: fmt.Sprintf("lease expired on attempt %d of %d with no heartbeat; no attempt left", j.Attempts, j.MaxAttempts)}
		c.reason = o.Reason
	}
	cond := leaseHeld(token).And(leaseRunOut(now))
	u := s.jobUpdate(c, cond, now)
	err = s.releaseBySystem(ctx, u, j.WorkerID, now)
	if errors.Is(err, errConditionFailed) {
		return "", nil, nil // heartbeat, completion or another sweep got there first
	}
	if err != nil {
		return "", nil, fmt.Errorf("expire lease of job %s: %w", id, err)
	}
	s.log.Info("lease expired", "job_id", id, "worker_id", j.WorkerID, "fleet", j.FleetSlug, "to", o.Status, "attempts", o.Attempts)
	return o.Status, readyAfter(c, now), nil
}

// readyAfter is the job as a change back to the ready queue wrote it, or
// nil when the change left it elsewhere (dead, or a retry's backoff).
func readyAfter(c change, now time.Time) *jobItem {
	if c.to != job.Queued || c.notBefore.After(now) {
		return nil
	}
	it := *c.it
	it.Status, it.UpdatedMS, it.LeaseToken, it.WorkerID = string(job.Queued), ms(now), "", ""
	if !c.keepCounters {
		it.Attempts, it.Preemptions = c.attempts, c.preemptions
	}
	it.OnDemandOnly = it.OnDemandOnly || c.onDemandOnly
	return &it
}

// refileLease moves a live lease's index entry to the expiry its last
// heartbeat set, so that the sweeps stop finding it until then. Heartbeats
// write only lease_until_ms (report.go); this write, made by the sweep that
// found the filed expiry passed, is the only one that moves a running
// lease's entry: once per lease time at most, not once per heartbeat.
func (s *Store) refileLease(ctx context.Context, it *jobItem, now time.Time) error {
	if it.Status != string(job.Leased) || it.LeaseExpiresMS > ms(now) || it.LeaseUntilMS <= it.LeaseExpiresMS {
		return nil
	}
	until := fromMS(it.LeaseUntilMS)
	set := expression.Set(expression.Name(attrLeaseExpiresMS), expression.Value(it.LeaseUntilMS)).
		Set(expression.Name(AttrGSI1SK), expression.Value(timeSortKey(until, it.JobID)))
	cond := leaseHeld(it.LeaseToken).And(expression.Name(attrLeaseUntilMS).Equal(expression.Value(it.LeaseUntilMS)))
	err := s.updateItem(ctx, update{pk: it.PK, sk: it.SK, set: set, cond: cond})
	if err != nil && !errors.Is(err, errConditionFailed) {
		return fmt.Errorf("refile lease of job %s: %w", it.JobID, err)
	}
	return nil // a refused write: the lease moved on, the next sweep looks again
}

// LeaseStats counts lease claims and the claims lost to another poller.
type LeaseStats = lease.Stats

// LeaseStats returns the claim counters since the store was created.
func (s *Store) LeaseStats() LeaseStats { return s.planner.Stats() }
