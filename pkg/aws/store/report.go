package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// Heartbeat extends a lease. It is one conditional write of the job item,
// fenced by the lease token, the worker and the digest of the token the
// worker leased with (attrLeaseAuth): it sets lease_until_ms, which no
// index projects, so it moves no index entry and leaves the worker item
// alone (docs/data-model.md, "Heartbeats"). A token rotated or replaced by
// a new registration since the lease is therefore refused by the write
// itself, in every API process whatever it remembers of checked tokens; a
// worker revoked meanwhile has lost its leases already (RevokeWorker
// requeues them). When the write is refused, the worker's token is checked
// against the worker item; if it is the worker's current token and the
// lease is still its own, the lease was taken under an earlier token of
// the same worker (rotated since, or a lease of a release that kept no
// digest), and the heartbeat is written again with the current digest in
// a transaction that checks it on the worker item. A worker holding a
// live lease counts as seen (the scaler's snapshot), so the heartbeat need
// not touch the worker's last_seen_ms either.
func (s *Store) Heartbeat(ctx context.Context, a WorkerAuth, jobID, token string, progress *float64) (HeartbeatResult, error) {
	return s.heartbeat(ctx, a, jobID, token, progress, time.Time{})
}

// heartbeat extends the lease by the fleet's lease time, or only up to
// limit when that is earlier (the attempt's run deadline).
func (s *Store) heartbeat(ctx context.Context, a WorkerAuth, jobID, token string, progress *float64, limit time.Time) (HeartbeatResult, error) {
	f, err := s.fleet(a.Fleet)
	if err != nil {
		return HeartbeatResult{}, err
	}
	now := s.clock.Now()
	exp := now.Add(f.LeaseDuration())
	if !limit.IsZero() && limit.Before(exp) {
		exp = limit
	}
	pk, sk := jobKey(jobID)
	set := expression.Set(expression.Name(attrLeaseUntilMS), expression.Value(ms(exp))).
		Set(expression.Name(attrHeartbeatMS), expression.Value(ms(now)))
	if progress != nil {
		set = set.Set(expression.Name(attrProgress), expression.Value(*progress))
	}
	held := leaseHeldBy(token, a.WorkerID).And(runDeadlineAfter(exp))
	err = s.updateItem(ctx, update{pk: pk, sk: sk, set: set, cond: held.And(leaseAuthIs(a.TokenHash))})
	if err == nil {
		return HeartbeatResult{LeaseExpiresAt: exp}, nil
	}
	if !errors.Is(err, errConditionFailed) {
		return HeartbeatResult{}, fmt.Errorf("heartbeat job %s: %w", jobID, err)
	}
	if _, aerr := s.Authorize(ctx, a); aerr != nil {
		return HeartbeatResult{}, aerr
	}
	it, err := s.getJobItem(ctx, jobID)
	if errors.Is(err, ErrNotFound) {
		return HeartbeatResult{}, ErrLeaseLost
	}
	if err != nil {
		return HeartbeatResult{}, err
	}
	if it.Status == string(job.Canceled) && it.LeaseToken == token && it.WorkerID == a.WorkerID {
		return HeartbeatResult{LeaseExpiresAt: fromMS(it.leaseExpires()), Cancel: true}, nil
	}
	if it.Status == string(job.Leased) && it.LeaseToken == token && it.WorkerID == a.WorkerID && it.RunDeadlineMS > 0 {
		deadline := fromMS(it.RunDeadlineMS)
		if !deadline.After(now) {
			// The attempt overran: revoke the lease, fail the attempt.
			if _, _, err := s.expireRun(ctx, it, now); err != nil {
				return HeartbeatResult{}, err
			}
			return HeartbeatResult{}, ErrLeaseLost
		}
		if exp.After(deadline) && limit.IsZero() {
			// The last extension ends at the run deadline, not past it.
			return s.heartbeat(ctx, a, jobID, token, progress, deadline)
		}
	}
	if it.Status == string(job.Leased) && it.LeaseToken == token && it.WorkerID == a.WorkerID && it.LeaseAuth != a.TokenHash {
		// The lease is the worker's, taken under an earlier token: the
		// token just checked becomes the lease's, checked again on the
		// worker item in the same transaction.
		wpk, wsk := workerKey(a.WorkerID)
		err := s.transact(ctx,
			txItem{name: memberJob, update: &update{pk: pk, sk: sk, set: set.Set(expression.Name(attrLeaseAuth), expression.Value(a.TokenHash)), cond: held}},
			txItem{name: memberWorker, check: &update{pk: wpk, sk: wsk, cond: authCond(a)}})
		if err == nil {
			return HeartbeatResult{LeaseExpiresAt: exp}, nil
		}
		var tf *txFailed
		if !errors.As(err, &tf) {
			return HeartbeatResult{}, fmt.Errorf("heartbeat job %s: %w", jobID, err)
		}
		if tf.failed(memberWorker) {
			if _, aerr := s.Authorize(ctx, a); aerr != nil {
				return HeartbeatResult{}, aerr
			}
		}
	}
	return HeartbeatResult{}, ErrLeaseLost
}

// leaseAuthIs is the condition that the lease was taken, or last extended,
// with the token of this digest.
func leaseAuthIs(tokenHash string) expression.ConditionBuilder {
	return expression.Name(attrLeaseAuth).Equal(expression.Value(tokenHash))
}

// Complete records success. Repeating it with the same token answers nil again.
func (s *Store) Complete(ctx context.Context, a WorkerAuth, jobID, token string, result json.RawMessage) error {
	now := s.clock.Now()
	pk, sk := jobKey(jobID)
	it := &jobItem{PK: pk, SK: sk, JobID: jobID, Fleet: a.Fleet, Status: string(job.Leased)}
	if holdsLeaseSlot(token) {
		// The lease holds a slot of its tenant's leased counter: read whose,
		// to give it back with the completion (leasecap.go).
		cur, err := s.getJobItem(ctx, jobID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("complete job %s: %w", jobID, err)
		}
		if err == nil && cur.Status == string(job.Leased) && cur.LeaseToken == token {
			it.TenantID, it.LeaseToken = cur.TenantID, token
		}
	}
	c := change{it: it, to: job.Succeeded, reason: job.ReasonSucceeded, worker: a.WorkerID, result: string(result), keepCounters: true}
	u := s.jobUpdate(c, leaseHeldBy(token, a.WorkerID), now)
	w := releaseFromWorker(a.WorkerID, now, authCond(a))
	w.set = w.set.Set(expression.Name(attrLastSeenMS), expression.Value(ms(now)))
	err := s.transact(ctx, txItem{name: memberJob, update: &u}, txItem{name: memberWorker, update: w})
	if err == nil {
		s.log.Info("job succeeded", "job_id", jobID, "worker_id", a.WorkerID, "fleet", a.Fleet)
		return nil
	}
	var tf *txFailed
	if !errors.As(err, &tf) {
		return fmt.Errorf("complete job %s: %w", jobID, err)
	}
	if _, aerr := s.Authorize(ctx, a); aerr != nil {
		return aerr
	}
	cur, err := s.getJobItem(ctx, jobID)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return ErrLeaseLost
		}
		return err
	}
	if cur.Status == string(job.Succeeded) && cur.LeaseToken == token && cur.WorkerID == a.WorkerID {
		return nil // a repeat of the same completion
	}
	return ErrLeaseLost
}

// Fail records a failed attempt: the job is retried after its backoff while
// attempts remain and the error is retryable, else it is dead. It answers
// where the job now stands.
func (s *Store) Fail(ctx context.Context, a WorkerAuth, jobID, token string, e job.Error) (job.Outcome, error) {
	f, err := s.fleet(a.Fleet)
	if err != nil {
		return job.Outcome{}, err
	}
	return s.workerRelease(ctx, a, jobID, token, func(j job.Job, now time.Time) (change, job.Outcome) {
		o := job.AfterFailure(j, e, f.Retry, now)
		je := e
		return change{to: o.Status, reason: o.Reason, notBefore: o.NotBefore, attempts: o.Attempts, preemptions: o.Preemptions, jobErr: &je}, o
	})
}

// Requeue gives a job back without spending an attempt (a preemption), unless
// the job has hit its preemption cap: then it is dead, or, in a fleet with an
// On-Demand rung, queued for On-Demand workers only (job.AfterPreemption).
func (s *Store) Requeue(ctx context.Context, a WorkerAuth, jobID, token string, reason job.PreemptReason) (job.Outcome, error) {
	f, err := s.fleet(a.Fleet)
	if err != nil {
		return job.Outcome{}, err
	}
	return s.workerRelease(ctx, a, jobID, token, func(j job.Job, _ time.Time) (change, job.Outcome) {
		o := job.AfterPreemption(j, f.OnDemand.Enabled())
		return preemptionChange(j, o, reason.Reason()), o
	})
}

// workerRelease ends a lease at its worker's request. The decision needs the
// job's counters, so the job is read first and written back under the same
// lease token (the write fails if anything moved the lease meanwhile).
func (s *Store) workerRelease(ctx context.Context, a WorkerAuth, jobID, token string, decide func(job.Job, time.Time) (change, job.Outcome)) (job.Outcome, error) {
	now := s.clock.Now()
	it, err := s.getJobItem(ctx, jobID)
	if errors.Is(err, ErrNotFound) {
		if _, aerr := s.Authorize(ctx, a); aerr != nil {
			return job.Outcome{}, aerr
		}
		return job.Outcome{}, ErrLeaseLost
	}
	if err != nil {
		return job.Outcome{}, err
	}
	j := it.toJob()
	if j.Status != job.Leased || j.LeaseToken != token || j.WorkerID != a.WorkerID {
		if _, aerr := s.Authorize(ctx, a); aerr != nil {
			return job.Outcome{}, aerr
		}
		// A repeat of a report this lease already made answers what it did.
		if j.LeaseToken == token && j.WorkerID == a.WorkerID && (j.Status == job.Queued || j.Status == job.Dead) {
			return job.Outcome{Status: j.Status, NotBefore: notBeforeOf(j, now), Attempts: j.Attempts, Preemptions: j.Preemptions, Reason: j.Reason}, nil
		}
		return job.Outcome{}, ErrLeaseLost
	}
	c, o := decide(j, now)
	c.it, c.full, c.worker = it, true, a.WorkerID
	u := s.jobUpdate(c, leaseHeldBy(token, a.WorkerID), now)
	w := releaseFromWorker(a.WorkerID, now, authCond(a))
	w.set = w.set.Set(expression.Name(attrLastSeenMS), expression.Value(ms(now)))
	err = s.transact(ctx, txItem{name: memberJob, update: &u}, txItem{name: memberWorker, update: w})
	var tf *txFailed
	switch {
	case err == nil:
		s.log.Info("lease released", "job_id", jobID, "worker_id", a.WorkerID, "fleet", a.Fleet, "to", o.Status, "reason", c.reason, "attempts", o.Attempts, "preemptions", o.Preemptions)
		return o, nil
	case errors.As(err, &tf) && tf.failed(memberWorker):
		if _, aerr := s.Authorize(ctx, a); aerr != nil {
			return job.Outcome{}, aerr
		}
		return job.Outcome{}, fmt.Errorf("release job %s: %w", jobID, ErrContention)
	case errors.As(err, &tf):
		return job.Outcome{}, ErrLeaseLost
	default:
		return job.Outcome{}, fmt.Errorf("release job %s: %w", jobID, err)
	}
}

func notBeforeOf(j job.Job, now time.Time) time.Time {
	if j.Status == job.Queued && j.NotBefore.After(now) {
		return j.NotBefore
	}
	return time.Time{}
}

// Cancel cancels an accepted, queued or leased job. An accepted job (not yet
// filed by dispatch) is canceled for good: dispatch never queues it. A
// leased job is canceled at once
// (its lease is fenced off) and its worker learns it at its next heartbeat.
// Canceling a canceled job answers canceled again; a succeeded or dead job is
// ErrConflict.
func (s *Store) Cancel(ctx context.Context, jobID string) (job.Status, error) {
	for range 5 {
		now := s.clock.Now()
		it, err := s.getJobItem(ctx, jobID)
		if err != nil {
			return "", err
		}
		j := it.toJob()
		c := change{it: it, full: true, to: job.Canceled, reason: job.ReasonCanceled, attempts: j.Attempts, preemptions: j.Preemptions, worker: j.WorkerID}
		switch j.Status {
		case job.Canceled:
			return job.Canceled, nil
		case job.Succeeded, job.Dead:
			return j.Status, fmt.Errorf("job %s is already %s: %w", jobID, j.Status, ErrConflict)
		case job.Accepted:
			// Not yet filed: canceled for good, so dispatch never queues it
			// (CreateJob finds it canceled), and announced once, here.
			err = s.updateItem(ctx, s.jobUpdate(c, expression.Name(attrStatus).Equal(expression.Value(string(job.Accepted))), now))
		case job.Queued:
			cond := expression.Name(attrStatus).Equal(expression.Value(string(job.Queued))).
				And(expression.Name(AttrGSI1PK).Equal(expression.Value(it.GSI1PK)))
			err = s.updateItem(ctx, s.jobUpdate(c, cond, now))
		case job.Leased:
			u := s.jobUpdate(c, leaseHeld(j.LeaseToken), now)
			u.set = u.set.Set(expression.Name(attrCancelRequested), expression.Value(true))
			err = s.releaseBySystem(ctx, u, j.WorkerID, now)
		}
		if errors.Is(err, errConditionFailed) {
			continue // the job moved meanwhile: look again
		}
		if err != nil {
			return "", fmt.Errorf("cancel job %s: %w", jobID, err)
		}
		s.log.Info("job canceled", "job_id", jobID, "fleet", j.FleetSlug, "was", j.Status, "worker_id", j.WorkerID)
		return job.Canceled, nil
	}
	return "", fmt.Errorf("cancel job %s: %w", jobID, ErrContention)
}

// RetryDead puts a dead job back in the queue with fresh attempts and preemptions.
func (s *Store) RetryDead(ctx context.Context, jobID string) (job.Job, error) {
	now := s.clock.Now()
	it, err := s.getJobItem(ctx, jobID)
	if err != nil {
		return job.Job{}, err
	}
	if it.Status != string(job.Dead) {
		return job.Job{}, fmt.Errorf("job %s is %s, only a dead job can be retried: %w", jobID, it.Status, ErrConflict)
	}
	c := change{it: it, full: true, to: job.Queued, reason: job.ReasonOperatorRetry}
	u := s.jobUpdate(c, expression.Name(attrStatus).Equal(expression.Value(string(job.Dead))), now)
	u.set = u.set.Set(expression.Name(AttrTTL), null()).Set(expression.Name(attrError), null()).Set(expression.Name(attrErrorCode), null()).
		Set(expression.Name(attrOnDemandOnly), null())
	u.tally = retryRecount(it)
	if err := s.updateItem(ctx, u); err != nil {
		if errors.Is(err, errConditionFailed) {
			return job.Job{}, fmt.Errorf("job %s changed meanwhile: %w", jobID, ErrConflict)
		}
		return job.Job{}, err
	}
	return s.GetJob(ctx, jobID)
}

// requeueWorkerLeases gives back every lease a worker (as read) holds,
// without spending attempts (each counts as a preemption); see
// RequeueLeasesOf.
func (s *Store) requeueWorkerLeases(ctx context.Context, w worker.Worker, reason job.Reason) (int, error) {
	return s.RequeueLeasesOf(ctx, []worker.Worker{w}, reason, nil)
}

// RequeueWorkerLeases gives back every lease of a worker (an interruption the
// agent could not report itself). It answers how many jobs were requeued.
func (s *Store) RequeueWorkerLeases(ctx context.Context, workerID string, reason job.Reason) (int, error) {
	w, err := s.GetWorker(ctx, workerID)
	if err != nil {
		return 0, err
	}
	return s.requeueWorkerLeases(ctx, w, reason)
}

func (s *Store) preemptBySystem(ctx context.Context, jobID, token, workerID string, reason job.Reason) (bool, error) {
	now := s.clock.Now()
	it, err := s.getJobItem(ctx, jobID)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	j := it.toJob()
	if j.Status != job.Leased || j.LeaseToken != token || j.WorkerID != workerID {
		return false, nil
	}
	rung := false
	if f, ok := s.cfg.Fleet(j.FleetSlug); ok {
		rung = f.OnDemand.Enabled()
	}
	o := job.AfterPreemption(j, rung)
	c := preemptionChange(j, o, reason)
	c.it, c.full, c.worker = it, true, workerID
	err = s.releaseBySystem(ctx, s.jobUpdate(c, leaseHeldBy(token, workerID), now), workerID, now)
	if errors.Is(err, errConditionFailed) {
		return false, nil // the worker's own report or an expiry won the race
	}
	if err != nil {
		return false, fmt.Errorf("requeue job %s: %w", jobID, err)
	}
	s.log.Info("lease requeued", "job_id", jobID, "worker_id", workerID, "fleet", j.FleetSlug, "reason", reason, "to", o.Status, "preemptions", o.Preemptions)
	return true, nil
}

// preemptionChange is the change a preemption outcome makes: queued under the
// preemption's reason, pinned to On-Demand at the cap (reason
// preemption_cap_on_demand), or dead at the cap.
func preemptionChange(j job.Job, o job.Outcome, reason job.Reason) change {
	c := change{to: o.Status, reason: reason, attempts: o.Attempts, preemptions: o.Preemptions, onDemandOnly: o.OnDemandOnly}
	switch {
	case o.Status == job.Dead:
		c.reason = o.Reason
		c.jobErr = &job.Error{Code: string(job.ReasonPreemptionCap), Message: fmt.Sprintf("preempted %d times (cap %d), last by %s", o.Preemptions, j.MaxPreemptions, reason)}
	case o.Reason != "":
		c.reason = o.Reason
	}
	return c
}
