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

// runDeadlineAfter is the heartbeat's condition that the extended lease ends
// within the attempt's run deadline.
func runDeadlineAfter(exp time.Time) expression.ConditionBuilder {
	name := expression.Name(attrRunDeadlineMS)
	return expression.Or(expression.AttributeNotExists(name),
		name.Equal(expression.Value(0)),
		name.GreaterThanEqual(expression.Value(ms(exp))))
}

// expireRun revokes a lease whose attempt ran past its run deadline: the
// attempt fails as retryable (backoff, or dead when none is left). It
// answers the status the job moved to ("" when the worker or another sweep
// got there first) and the job as written when it may be leased now.
func (s *Store) expireRun(ctx context.Context, it *jobItem, now time.Time) (job.Status, *jobItem, error) {
	j := it.toJob()
	f, err := s.fleet(j.FleetSlug)
	if err != nil {
		return "", nil, err
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
		return "", nil, nil // the worker reported, or another sweep got there first
	}
	if err != nil {
		return "", nil, fmt.Errorf("end overrun attempt of job %s: %w", j.ID, err)
	}
	s.log.Info("attempt ran past its timeout", "job_id", j.ID, "worker_id", j.WorkerID, "fleet", j.FleetSlug, "to", o.Status, "attempts", o.Attempts)
	return o.Status, readyAfter(c, now), nil
}
