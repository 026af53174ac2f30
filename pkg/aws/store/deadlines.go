package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// Deadlines. A job has two clocks: queue_timeout_seconds bounds how long it
// may wait for its first lease (past it, it is dead with reason
// queue_timeout: work nobody started in time is often worthless), and
// timeout_seconds bounds each attempt's run (past it, the lease is revoked
// and the attempt fails as retryable with reason run_timeout).

// queueDeadlineOpen is the claim's condition that the job has not outwaited
// its queue deadline.
func queueDeadlineOpen(now time.Time) expression.ConditionBuilder {
	name := expression.Name(attrQueueDeadlineMS)
	return expression.Or(expression.AttributeNotExists(name),
		name.Equal(expression.Value(0)),
		name.GreaterThan(expression.Value(ms(now))))
}

// queueExpired reports, from an index candidate, whether a never-leased job
// has outwaited its queue timeout.
func queueExpired(c *jobItem, now time.Time) bool {
	return c.FirstLeasedMS == 0 && c.QueueTimeoutS > 0 &&
		c.CreatedMS+int64(c.QueueTimeoutS)*1000 <= ms(now)
}

// expireQueued moves a never-leased job past its queue deadline to dead. The
// condition re-checks the base item: a lease that won the race keeps the job.
func (s *Store) expireQueued(ctx context.Context, c *jobItem, now time.Time) (bool, error) {
	waited := time.Duration(c.QueueTimeoutS) * time.Second
	ch := change{it: c, to: job.Dead, reason: job.ReasonQueueTimeout, attempts: c.Attempts, preemptions: c.Preemptions,
		jobErr: &job.Error{Code: string(job.ReasonQueueTimeout), Message: fmt.Sprintf("no worker leased the job within its queue timeout of %s", waited)}}
	deadline := expression.Name(attrQueueDeadlineMS)
	cond := expression.Name(attrStatus).Equal(expression.Value(string(job.Queued))).
		And(deadline.GreaterThan(expression.Value(0))).
		And(deadline.LessThanEqual(expression.Value(ms(now))))
	err := s.updateItem(ctx, s.jobUpdate(ch, cond, now))
	if errors.Is(err, errConditionFailed) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("expire queued job %s: %w", c.JobID, err)
	}
	s.log.Info("job outwaited its queue timeout", "job_id", c.JobID, "fleet", c.Fleet, "queue_timeout_s", c.QueueTimeoutS)
	return true, nil
}

// dropQueueExpired expires the candidates past their queue deadline and
// returns the others.
func (s *Store) dropQueueExpired(ctx context.Context, cands []jobItem, now time.Time) ([]jobItem, error) {
	out := cands[:0:0]
	for i := range cands {
		if !queueExpired(&cands[i], now) {
			out = append(out, cands[i])
			continue
		}
		if _, err := s.expireQueued(ctx, &cands[i], now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ExpireQueueTimeouts expires a fleet's queued jobs that outwaited their
// queue timeout, so they end on time even when no worker polls. It reads the
// ready queue only: a job waiting out a retry backoff was leased before.
func (s *Store) ExpireQueueTimeouts(ctx context.Context, fleet string) (int, error) {
	now := s.clock.Now()
	cands, _, err := s.readReady(ctx, fleet, 0)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range cands {
		if !queueExpired(&cands[i], now) {
			continue
		}
		ok, err := s.expireQueued(ctx, &cands[i], now)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// runDeadlineAfter is the heartbeat's condition that the extended lease ends
// within the attempt's run deadline.
func runDeadlineAfter(exp time.Time) expression.ConditionBuilder {
	name := expression.Name(attrRunDeadlineMS)
	return expression.Or(expression.AttributeNotExists(name),
		name.Equal(expression.Value(0)),
		name.GreaterThanEqual(expression.Value(ms(exp))))
}

// expireRun revokes a lease whose attempt ran past its run deadline: the
// attempt fails as retryable (backoff, or dead when none is left).
func (s *Store) expireRun(ctx context.Context, it *jobItem, now time.Time) error {
	j := it.toJob()
	f, err := s.fleet(j.FleetSlug)
	if err != nil {
		return err
	}
	e := job.Error{Code: string(job.ReasonRunTimeout), Message: fmt.Sprintf("attempt %d ran past its timeout of %ds", j.Attempts, it.TimeoutS), Retryable: true}
	o := job.AfterFailure(j, e, f.Retry, now)
	reason := job.ReasonRunTimeout
	if o.Status == job.Dead {
		reason = o.Reason
	}
	c := change{it: it, full: true, to: o.Status, reason: reason, notBefore: o.NotBefore, attempts: o.Attempts, preemptions: o.Preemptions, worker: j.WorkerID, jobErr: &e}
	cond := leaseHeld(j.LeaseToken).
		And(expression.Name(attrRunDeadlineMS).GreaterThan(expression.Value(0))).
		And(expression.Name(attrRunDeadlineMS).LessThanEqual(expression.Value(ms(now))))
	err = s.releaseBySystem(ctx, s.jobUpdate(c, cond, now), j.WorkerID, now)
	if errors.Is(err, errConditionFailed) {
		return nil // the worker reported, or another sweep got there first
	}
	if err != nil {
		return fmt.Errorf("end overrun attempt of job %s: %w", j.ID, err)
	}
	s.log.Info("attempt ran past its timeout", "job_id", j.ID, "worker_id", j.WorkerID, "fleet", j.FleetSlug, "to", o.Status, "attempts", o.Attempts)
	return nil
}
