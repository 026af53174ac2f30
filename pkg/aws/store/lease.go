package store

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// leaseRereads is how many times a poll reads the ready queue again after
// losing a claim to another poller. Each read doubles the window of oldest
// jobs the claim is picked from at random: with few pollers the order stays
// close to strict priority-then-age, and the harder pollers collide, the
// wider they spread. The last read tries every candidate in turn.
const leaseRereads = 4

// LeaseNext leases one job of the worker's fleet whose workflow it serves:
// highest priority first, then oldest; when the stage lists tenants, within
// the top priority the fair-share rule first picks whose job (fairlease.go). The job claim and the worker's check
// (its token, not draining or revoked, approved, under max_concurrency, and
// its lease count) are one transaction, so a worker being drained as a
// scale-in victim can never get a lease in the same instant.
//
// Due retries and expired leases found on the way are put back in the ready
// queue and claimed like any other job. ErrNoJob means nothing to lease now.
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
	for round := 0; round <= leaseRereads; round++ {
		now := s.clock.Now()
		window := min(s.leaseWindow()<<round, s.maxWindow())
		cands, full, err := s.readReady(ctx, f.Slug, ceilDiv(max(s.limit, window), s.shardCount(f.Slug)))
		if err != nil {
			return job.Job{}, err
		}
		cands = s.taken.drop(cands, now)
		if cands, err = s.dropQueueExpired(ctx, cands, now); err != nil {
			return job.Job{}, err
		}
		ready, err := s.leaseOrder(ctx, a, f.Slug, workflows, cands, full, window, now)
		if err != nil {
			return job.Job{}, err
		}
		// One claim per read: a lost claim says the read is stale, and the
		// jobs next to the lost one are the likeliest to be gone too, so
		// read again rather than spend failed transactions on them.
		j, lost, err := s.claimFirst(ctx, a, ready, f.LeaseDuration(), now, round < leaseRereads)
		if lost {
			s.widenLeaseWindow()
		} else if err == nil {
			s.narrowLeaseWindow()
		}
		if err == nil || !errors.Is(err, ErrNoJob) {
			return j, err
		}
		if lost {
			continue
		}
		// Nothing ready: bring back due retries and expired leases, then try
		// those, in the lease rule's order like any other candidates (the
		// list is whole: nothing lies beyond it).
		back, err := s.reclaimable(ctx, f.Slug, now)
		if err != nil {
			return job.Job{}, err
		}
		inQueueOrder(back)
		if back, err = s.leaseOrder(ctx, a, f.Slug, workflows, back, false, window, now); err != nil {
			return job.Job{}, err
		}
		if len(back) > 0 {
			j, _, err := s.claimFirst(ctx, a, back, f.LeaseDuration(), now, false)
			if err == nil || !errors.Is(err, ErrNoJob) {
				return j, err
			}
		}
		break
	}
	if err := s.TouchWorker(ctx, a); err != nil {
		return job.Job{}, err
	}
	return job.Job{}, ErrNoJob
}

// The lease window is how many of the oldest top-priority candidates a poll
// picks its claim from at random. It adapts to contention as TCP's window
// does, in reverse: it doubles (up to maxWindow) when a claim is lost to
// another poller and shrinks by one on each claim won at the first try, so
// a quiet fleet leases in nearly strict order and a crowded one spreads its
// pollers over more jobs. A window wider than the candidate limit reads
// that many: on DynamoDB a claimed job stays in the index until it catches
// up (about a second), so at a high lease rate the queue's head a poll
// reads is mostly taken, and only a pick from deeper in the queue finds a
// free job (docs/data-model.md, "Lost claims under index lag"). It is per
// Store, i.e. per process or warm Lambda instance; each learns the
// contention it sees.
func (s *Store) leaseWindow() int {
	return max(int(s.window.Load()), s.spread)
}

// maxWindowLimits is the widest lease window in candidate limits.
const maxWindowLimits = 4

func (s *Store) maxWindow() int { return maxWindowLimits * s.limit }

func (s *Store) widenLeaseWindow() {
	w := s.window.Load()
	s.window.CompareAndSwap(w, int64(min(2*max(int(w), s.spread), s.maxWindow())))
}

func (s *Store) narrowLeaseWindow() {
	if w := s.window.Load(); int(w) > s.spread {
		s.window.CompareAndSwap(w, w-1)
	}
}

// leaseOrder puts the candidates read from the ready queue in the order
// the lease rule (lease.Order) says to try them, having read first what the
// rule needs: the worker's purchase option when a pinned job is among them
// (ondemand.go), and with fair share the other tenants' jobs past one
// tenant's backlog and the tenants' census (fairlease.go).
func (s *Store) leaseOrder(ctx context.Context, a WorkerAuth, fleet string, workflows []string, items []jobItem, full bool, spread int, now time.Time) ([]jobItem, error) {
	byID := make(map[string]jobItem, len(items))
	cands := candidates(items, byID)
	w, err := s.pollWorker(ctx, a, workflows, cands)
	if err != nil {
		return nil, err
	}
	t := lease.Tenants{FairShare: s.fairShare()}
	if t.FairShare {
		t.Settings = s.cfg.Tenant
		fs := s.fairFor(fleet)
		if tenant, priority, one := lease.OneTenantAtTop(lease.Leasable(cands, w)); full && one {
			// The read may have stopped short of everyone else's jobs.
			more, err := s.othersAtTop(ctx, fs, fleet, priority, tenant, now)
			if err != nil {
				return nil, err
			}
			cands = append(cands, candidates(more, byID)...)
		}
		if lease.NeedsCensus(lease.Leasable(cands, w), t) {
			if t.Leased, err = s.leasedByTenant(ctx, fs, fleet, now); err != nil {
				return nil, err
			}
		}
	}
	return itemsInOrder(lease.Order(cands, w, t, spread, mrand.Shuffle), byID), nil
}

// pollWorker is the polling worker as the lease rule sees it. Its
// purchase option is read only when a pinned job is among the candidates.
func (s *Store) pollWorker(ctx context.Context, a WorkerAuth, workflows []string, cands []lease.Candidate) (lease.Worker, error) {
	w := lease.Worker{Workflows: workflows}
	if lease.Pinned(cands) {
		p, err := s.purchaseOf(ctx, a.WorkerID)
		if err != nil {
			return w, err
		}
		w.OnDemand = p == cost.OnDemand
	}
	return w, nil
}

// candidates are the jobs as the lease rule sees them; byID keeps the
// items to map the rule's order back.
func candidates(items []jobItem, byID map[string]jobItem) []lease.Candidate {
	out := make([]lease.Candidate, len(items))
	for i, it := range items {
		byID[it.JobID] = it
		out[i] = lease.Candidate{JobID: it.JobID, TenantID: it.TenantID, WorkflowID: it.WorkflowID, Priority: it.Priority,
			Created: fromMS(it.CreatedMS), OnDemandOnly: it.OnDemandOnly}
	}
	return out
}

func itemsInOrder(order []lease.Candidate, byID map[string]jobItem) []jobItem {
	out := make([]jobItem, len(order))
	for i, c := range order {
		out[i] = byID[c.JobID]
	}
	return out
}

// claimFirst tries the candidates in order; with stopAtLost, it stops at
// the first claim lost to another poller. lost reports whether any were
// taken by another poller first. The jobs of a tenant found at its
// max_leased cap are passed over (leasecap.go).
func (s *Store) claimFirst(ctx context.Context, a WorkerAuth, cands []jobItem, leaseFor time.Duration, now time.Time, stopAtLost bool) (job.Job, bool, error) {
	lost := false
	var full []string
	for i := range cands {
		if slices.Contains(full, cands[i].TenantID) {
			continue
		}
		j, err := s.claim(ctx, a, &cands[i], leaseFor, now)
		switch {
		case err == nil:
			s.fairClaimed(a.Fleet, &cands[i], true)
			return j, lost, nil
		case errors.Is(err, errTenantFull):
			full = append(full, cands[i].TenantID)
			s.fairFull(a.Fleet, cands[i].TenantID, s.leaseCap(cands[i].TenantID))
			continue
		case errors.Is(err, errJobTaken):
			s.fairClaimed(a.Fleet, &cands[i], false)
			lost = true
			if stopAtLost {
				return job.Job{}, lost, ErrNoJob
			}
			continue
		default:
			return job.Job{}, lost, err
		}
	}
	return job.Job{}, lost, ErrNoJob
}

var errJobTaken = errors.New("job taken by another poller")

func (s *Store) claim(ctx context.Context, a WorkerAuth, c *jobItem, leaseFor time.Duration, now time.Time) (job.Job, error) {
	token := newToken()
	limit := s.leaseCap(c.TenantID)
	if limit > 0 {
		token = slotTokenPrefix + token
	}
	exp := now.Add(leaseFor)
	var runDeadline int64
	if c.TimeoutS > 0 {
		// A lease never outlives the attempt's run time: heartbeats extend
		// it up to the deadline and no further (see Heartbeat).
		d := now.Add(time.Duration(c.TimeoutS) * time.Second)
		runDeadline = ms(d)
		if d.Before(exp) {
			exp = d
		}
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
	if limit > 0 {
		items = append(items, txItem{name: memberLeaseSlot, update: takeLeaseSlot(c.TenantID, limit, now)})
	}
	err := s.transact(ctx, items...)
	var tf *txFailed
	var unsure error
	switch {
	case err == nil:
	case errors.As(err, &tf) && tf.only(memberLeaseSlot):
		return job.Job{}, errTenantFull
	case errors.As(err, &tf) && tf.failed(memberWorker):
		// The worker may not lease: find out whether its token is bad or it
		// is just draining, unapproved or full.
		if _, aerr := s.Authorize(ctx, a); aerr != nil {
			return job.Job{}, aerr
		}
		return job.Job{}, ErrNoJob
	case errors.As(err, &tf) || errors.Is(err, ErrContention):
		s.conflicts.Add(1)
		if tf != nil && tf.failed(memberJob) {
			s.taken.add(c, now) // not after a conflict of transactions: the job may still be free
		}
		return job.Job{}, errJobTaken
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
		s.claims.Add(1)
		return it.toJob(), nil
	case mine:
		rerr = fmt.Errorf("the poll ended before its answer: %w", ctx.Err())
	case rerr == nil && unsure != nil:
		// The claim never committed: nothing changed.
		return job.Job{}, fmt.Errorf("lease job %s: %w", c.JobID, unsure)
	case rerr == nil:
		// The lease is already over (it ran out and was swept, or the job
		// was canceled); whoever ended it gave the worker its count back.
		s.conflicts.Add(1)
		return job.Job{}, errJobTaken
	}
	// The lease cannot be handed over: take the claim back, attempt unspent.
	if uerr := s.undoClaim(settle, a, c, token, now); uerr != nil {
		return job.Job{}, fmt.Errorf("read leased job %s: %w; undo the claim: %w", c.JobID, rerr, uerr)
	}
	s.log.Warn("lease undone", "job_id", c.JobID, "worker_id", a.WorkerID, "err", rerr)
	return job.Job{}, fmt.Errorf("read leased job %s (claim undone): %w", c.JobID, rerr)
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

// reclaimable promotes due retries and expires run-out leases of a fleet (a
// few each), returning the jobs now ready to claim.
func (s *Store) reclaimable(ctx context.Context, fleet string, now time.Time) ([]jobItem, error) {
	promoted, err := s.promoteDue(ctx, fleet, now, s.limit)
	if err != nil {
		return nil, err
	}
	ids, _, err := s.expireLeases(ctx, fleet, now, s.limit)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		it, err := s.getJobItem(ctx, id)
		if err != nil {
			return nil, err
		}
		promoted = append(promoted, *it)
	}
	return promoted, nil
}

// PromoteDue moves a fleet's retries whose backoff has passed into the ready
// queue, so they are counted and ordered with the rest. It returns how many moved.
func (s *Store) PromoteDue(ctx context.Context, fleet string) (int, error) {
	moved, err := s.promoteDue(ctx, fleet, s.clock.Now(), 0)
	return len(moved), err
}

func (s *Store) promoteDue(ctx context.Context, fleet string, now time.Time, limit int) ([]jobItem, error) {
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
			return out, err
		}
		c.GSI1PK, c.GSI1SK = pk, sk
		out = append(out, c)
	}
	return out, nil
}

// SweepExpiredLeases ends every run-out lease of a fleet: the attempt is
// spent, and the job is queued again or, with no attempt left, dead. The
// poll path runs the same sweep on a few leases before it claims.
func (s *Store) SweepExpiredLeases(ctx context.Context, fleet string) (SweepResult, error) {
	_, r, err := s.expireLeases(ctx, fleet, s.clock.Now(), 0)
	return r, err
}

// expireLeases ends up to limit (0: every) run-out leases of a fleet, and
// answers the jobs queued again that may be leased now (not those a run
// timeout's backoff filed among the delayed retries) and the counts.
func (s *Store) expireLeases(ctx context.Context, fleet string, now time.Time, limit int) (requeued []string, r SweepResult, err error) {
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
		to, ready, err := s.expireLease(ctx, c.JobID, c.LeaseToken, now)
		if err != nil {
			return requeued, r, err
		}
		switch to {
		case job.Queued:
			r.Requeued++
			if ready {
				requeued = append(requeued, c.JobID)
			}
		case job.Dead:
			r.Dead++
		}
	}
	return requeued, r, nil
}

// expireLease ends one lease if it has really run out (read consistently, the
// index only pointed at it). It answers the status the job moved to, or ""
// when there was nothing to do, and whether the job may be leased now (a
// run timeout's backoff may have filed it among the delayed retries).
func (s *Store) expireLease(ctx context.Context, id, token string, now time.Time) (job.Status, bool, error) {
	it, err := s.getJobItem(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	j := it.toJob()
	if j.LeaseToken != token {
		return "", false, nil
	}
	if !job.LeaseExpired(j, now) {
		// Heartbeats extended it past the expiry the index files it under.
		return "", false, s.refileLease(ctx, it, now)
	}
	if it.RunDeadlineMS > 0 && it.RunDeadlineMS <= ms(now) {
		// The lease ran out at the run deadline: the attempt overran.
		if err := s.expireRun(ctx, it, now); err != nil {
			return "", false, err
		}
		cur, err := s.getJobItem(ctx, id)
		if err != nil {
			return "", false, err
		}
		return job.Status(cur.Status), job.Due(cur.toJob(), now), nil
	}
	o := job.AfterLeaseExpiry(j)
	c := change{it: it, full: true, to: o.Status, reason: job.ReasonLeaseExpired, attempts: o.Attempts, preemptions: o.Preemptions, worker: j.WorkerID}
	if o.Status == job.Dead {
		c.jobErr = &job.Error{Code: string(job.ReasonLeaseExpired), Message: fmt.Sprintf("lease expired on attempt %d of %d with no heartbeat; no attempt left", j.Attempts, j.MaxAttempts)}
		c.reason = o.Reason
	}
	cond := leaseHeld(token).And(leaseRunOut(now))
	err = s.releaseBySystem(ctx, s.jobUpdate(c, cond, now), j.WorkerID, now)
	if errors.Is(err, errConditionFailed) {
		return "", false, nil // heartbeat, completion or another sweep got there first
	}
	if err != nil {
		return "", false, fmt.Errorf("expire lease of job %s: %w", id, err)
	}
	s.log.Info("lease expired", "job_id", id, "worker_id", j.WorkerID, "fleet", j.FleetSlug, "to", o.Status, "attempts", o.Attempts)
	return o.Status, o.Status == job.Queued, nil
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
type LeaseStats struct {
	Claims    int64
	Conflicts int64
}

// LeaseStats returns the claim counters since the store was created.
func (s *Store) LeaseStats() LeaseStats {
	return LeaseStats{Claims: s.claims.Load(), Conflicts: s.conflicts.Load()}
}

// takenJobs remembers, for takenFor, the index entries of the jobs this
// process lost a claim on: another poller has them, though a lagging index
// still shows the entry, so this process's polls do not try them again
// meanwhile. An entry is the job as the index showed it (its last change,
// attempts and preemptions): a job given back to the queue is a new entry
// (its claim and its release changed it), leasable again at once.
type takenJobs struct {
	mu sync.Mutex
	at map[string]time.Time
}

// takenKey names a job's index entry.
func takenKey(it *jobItem) string {
	return fmt.Sprintf("%s|%d|%d|%d", it.JobID, it.UpdatedMS, it.Attempts, it.Preemptions)
}

// takenFor outlasts a DynamoDB index's usual lag (about a second).
const takenFor = 2 * time.Second

func (t *takenJobs) add(it *jobItem, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at == nil {
		t.at = map[string]time.Time{}
	}
	if len(t.at) >= 1024 {
		for k, at := range t.at {
			if now.Sub(at) >= takenFor {
				delete(t.at, k)
			}
		}
	}
	t.at[takenKey(it)] = now
}

// drop removes the jobs remembered as taken from items.
func (t *takenJobs) drop(items []jobItem, now time.Time) []jobItem {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.at) == 0 {
		return items
	}
	return slices.DeleteFunc(items, func(it jobItem) bool {
		at, ok := t.at[takenKey(&it)]
		return ok && now.Sub(at) < takenFor && !now.Before(at)
	})
}
