package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/job"
)

// NewJob is a validated submission.
type NewJob struct {
	ID                  string
	TenantID            string
	WorkflowID          string
	Priority            int
	Input               json.RawMessage
	MaxAttempts         int // 0: the fleet's retry policy
	TimeoutSeconds      int // 0: the fleet's job timeout
	QueueTimeoutSeconds int // 0: the fleet's queue timeout (none when that is 0)
}

// CreateJob creates a queued job unless one with the same ID exists; created
// is false for a repeat (the first submission wins, later ones change nothing).
func (s *Store) CreateJob(ctx context.Context, n NewJob) (j job.Job, created bool, err error) {
	f, ok := s.cfg.FleetForWorkflow(n.WorkflowID)
	if !ok {
		return job.Job{}, false, fmt.Errorf("workflow %q is served by no fleet: %w", n.WorkflowID, ErrNotFound)
	}
	now := s.clock.Now()
	it := jobItem{
		Type: "job", JobID: n.ID, TenantID: n.TenantID, WorkflowID: n.WorkflowID, Fleet: f.Slug,
		Status: string(job.Queued), Priority: n.Priority,
		MaxAttempts: n.MaxAttempts, MaxPreemptions: f.PreemptionCap,
		TimeoutS: n.TimeoutSeconds, QueueTimeoutS: n.QueueTimeoutSeconds,
		Input:     string(n.Input),
		CreatedMS: ms(now), UpdatedMS: ms(now), NotBeforeMS: ms(now),
		Reason:  job.ReasonCreated,
		History: []job.HistoryEntry{{At: now, To: job.Queued, Reason: job.ReasonCreated}},
	}
	if it.MaxAttempts == 0 {
		it.MaxAttempts = f.Retry.MaxAttempts
	}
	if it.TimeoutS == 0 {
		it.TimeoutS = int(f.JobTimeout.Std() / time.Second)
	}
	if it.QueueTimeoutS == 0 {
		it.QueueTimeoutS = int(f.QueueTimeout.Std() / time.Second)
	}
	if it.QueueTimeoutS > 0 {
		it.QueueDeadlineMS = ms(now.Add(time.Duration(it.QueueTimeoutS) * time.Second))
	}
	it.PK, it.SK = jobKey(n.ID)
	it.GSI1PK, it.GSI1SK = readyPartition(f.Slug), readySortKey(n.Priority, now, n.ID)
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return job.Job{}, false, fmt.Errorf("encode job: %w", err)
	}
	e, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))).Build()
	if err != nil {
		return job.Job{}, false, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if isConditionFailed(err) {
		existing, gerr := s.GetJob(ctx, n.ID)
		return existing, false, gerr
	}
	if err != nil {
		return job.Job{}, false, fmt.Errorf("create job %s: %w", n.ID, err)
	}
	return it.toJob(), true, nil
}

// GetJob reads a job (strongly consistent).
func (s *Store) GetJob(ctx context.Context, id string) (job.Job, error) {
	it, err := s.getJobItem(ctx, id)
	if err != nil {
		return job.Job{}, err
	}
	return it.toJob(), nil
}

func (s *Store) getJobItem(ctx context.Context, id string) (*jobItem, error) {
	pk, sk := jobKey(id)
	var it jobItem
	found, err := s.getItem(ctx, pk, sk, &it)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	return &it, nil
}

// change describes one transition of a job; jobUpdate turns it into the
// conditional write. It is the one place that knows where each status lives
// in IndexByState, so no transition can leave a job in a stale partition.
type change struct {
	it          *jobItem // the job as read, or the index candidate
	full        bool     // it is the whole item: rewrite (and trim) the history
	to          job.Status
	reason      string
	notBefore   time.Time
	attempts    int
	preemptions int
	jobErr      *job.Error
	result      string
	worker      string // for the history entry
	// keepCounters leaves attempts and preemptions as stored (the change
	// does not know them, e.g. a completion that read nothing).
	keepCounters bool
}

func (s *Store) jobUpdate(c change, cond expression.ConditionBuilder, now time.Time) update {
	it := c.it
	var pk, sk string
	switch {
	case c.to == job.Queued && c.notBefore.After(now):
		pk, sk = delayedPartition(it.Fleet), timeSortKey(c.notBefore, it.JobID)
	case c.to == job.Queued:
		pk, sk = readyPartition(it.Fleet), readySortKey(it.Priority, fromMS(it.CreatedMS), it.JobID)
	default:
		pk, sk = terminalPartition(it.Fleet, string(c.to)), timeSortKey(now, it.JobID)
	}
	entry := job.HistoryEntry{At: now, From: job.Status(it.Status), To: c.to, Reason: c.reason, Worker: c.worker, Attempt: it.Attempts}
	set := expression.Set(expression.Name("status"), expression.Value(string(c.to))).
		Set(expression.Name(AttrGSI1PK), expression.Value(pk)).
		Set(expression.Name(AttrGSI1SK), expression.Value(sk)).
		Set(expression.Name("updated_ms"), expression.Value(ms(now))).
		Set(expression.Name("reason"), expression.Value(c.reason))
	if !c.keepCounters {
		set = set.Set(expression.Name("attempts"), expression.Value(c.attempts)).
			Set(expression.Name("preemptions"), expression.Value(c.preemptions))
	}
	if c.full {
		set = set.Set(expression.Name("history"), expression.Value(append(job.Trim(it.History, 1), entry)))
	} else {
		set = set.Set(expression.Name("history"), expression.ListAppend(expression.Name("history"), expression.Value([]job.HistoryEntry{entry})))
	}
	if c.to == job.Queued {
		nb := c.notBefore
		if nb.Before(now) {
			nb = now
		}
		set = set.Set(expression.Name("not_before_ms"), expression.Value(ms(nb)))
	}
	if c.to.Terminal() {
		set = set.Set(expression.Name(AttrTTL), expression.Value(now.Add(s.retention()).Unix()))
	}
	if c.jobErr != nil {
		set = set.Set(expression.Name("error"), expression.Value(c.jobErr)).
			Set(expression.Name("error_code"), expression.Value(c.jobErr.Code))
	}
	if c.result != "" {
		set = set.Set(expression.Name("result"), expression.Value(c.result))
	}
	return update{pk: it.PK, sk: it.SK, set: set, cond: cond, event: s.outboxItem(c, now)}
}

// leaseHeld is the condition that the job is leased under this token.
func leaseHeld(token string) expression.ConditionBuilder {
	return expression.Name("status").Equal(expression.Value(string(job.Leased))).
		And(expression.Name("lease_token").Equal(expression.Value(token)))
}

// leaseHeldBy adds that the lease belongs to this worker.
func leaseHeldBy(token, worker string) expression.ConditionBuilder {
	return leaseHeld(token).And(expression.Name("worker_id").Equal(expression.Value(worker)))
}

// releaseFromWorker is the worker half of ending a lease: one lease fewer,
// and the release time the scaler reads as "idle since".
func releaseFromWorker(workerID string, now time.Time, cond expression.ConditionBuilder) *update {
	pk, sk := workerKey(workerID)
	return &update{pk: pk, sk: sk,
		set: expression.Set(expression.Name("leases"), expression.Minus(expression.Name("leases"), expression.Value(1))).
			Set(expression.Name("last_release_ms"), expression.Value(ms(now))),
		cond: cond,
	}
}

// releaseBySystem ends a lease on the control plane's initiative (expiry,
// cancel, revoke, instance gone): the job write and the holder's lease count
// move together; when the holder no longer exists, the job moves alone.
func (s *Store) releaseBySystem(ctx context.Context, u update, holder string, now time.Time) error {
	if holder != "" {
		err := s.transact(ctx, txItem{update: &u}, txItem{update: releaseFromWorker(holder, now, expression.AttributeExists(expression.Name(AttrPK)))})
		var tf *txFailed
		switch {
		case err == nil:
			return nil
		case errors.As(err, &tf) && tf.failedAt(0):
			return errConditionFailed
		case errors.As(err, &tf) && tf.failedAt(1):
			// holder deleted: fall through to the job-only write
		default:
			return err
		}
	}
	return s.updateItem(ctx, u)
}
