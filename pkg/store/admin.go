package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/job"
)

// Backlog is a fleet's live work, counted from the job records.
type Backlog struct {
	Ready   int // queued and due
	Delayed int // queued, waiting out a retry backoff
	Leased  int // being processed
}

// Queued is every queued job, due or not.
func (b Backlog) Queued() int { return b.Ready + b.Delayed }

// CountBacklog counts a fleet's queued and leased jobs. It reads only the
// live partitions of the index, so its cost follows the live backlog and
// never the number of finished jobs.
func (s *Store) CountBacklog(ctx context.Context, fleet string) (Backlog, error) {
	var b Backlog
	var err error
	if b.Ready, err = s.countIndex(ctx, readyPartition(fleet)); err != nil {
		return b, err
	}
	if b.Delayed, err = s.countIndex(ctx, delayedPartition(fleet)); err != nil {
		return b, err
	}
	if b.Leased, err = s.countIndex(ctx, leasedPartition(fleet)); err != nil {
		return b, err
	}
	return b, nil
}

// JobSummary is a job as the index knows it (no input, result or history).
type JobSummary struct {
	ID          string
	TenantID    string
	WorkflowID  string
	Status      job.Status
	Priority    int
	Attempts    int
	MaxAttempts int
	Preemptions int
	WorkerID    string
	Reason      string
	ErrorCode   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// ListJobs lists a fleet's jobs in one status, newest change first for
// finished jobs and queue order for queued ones. Index reads are eventually
// consistent, so a job that just changed may show in its old status briefly.
func (s *Store) ListJobs(ctx context.Context, fleet string, status job.Status, limit int) ([]JobSummary, error) {
	var partition string
	forward := false
	switch status {
	case job.Queued:
		partition, forward = readyPartition(fleet), true
	case job.Leased:
		partition, forward = leasedPartition(fleet), true
	case job.Succeeded, job.Dead, job.Canceled:
		partition = terminalPartition(fleet, string(status))
	default:
		return nil, fmt.Errorf("status %q: %w", status, ErrNotFound)
	}
	items, err := s.queryIndex(ctx, partition, "", limit, forward)
	if err != nil {
		return nil, err
	}
	if status == job.Queued && (limit <= 0 || len(items) < limit) {
		more, err := s.queryIndex(ctx, delayedPartition(fleet), "", limit-len(items), true)
		if err != nil {
			return nil, err
		}
		items = append(items, more...)
	}
	out := make([]JobSummary, 0, len(items))
	for _, it := range items {
		out = append(out, JobSummary{
			ID: it.JobID, TenantID: it.TenantID, WorkflowID: it.WorkflowID, Status: job.Status(it.Status),
			Priority: it.Priority, Attempts: it.Attempts, MaxAttempts: it.MaxAttempts, Preemptions: it.Preemptions,
			WorkerID: it.WorkerID, Reason: it.Reason, ErrorCode: it.ErrorCode,
			CreatedAt: fromMS(it.CreatedMS), UpdatedAt: fromMS(it.UpdatedMS),
		})
	}
	return out, nil
}

// TakeRegistrationSlot counts one registration attempt from a source address
// in the current one-minute window, refusing past limit. The counter lives in
// the table, so the limit holds across every API instance; windows expire by TTL.
func (s *Store) TakeRegistrationSlot(ctx context.Context, source string, limit int) (retryAfter time.Duration, err error) {
	now := s.clock.Now()
	window := now.Truncate(time.Minute)
	end := window.Add(time.Minute)
	count := expression.Name("count")
	err = s.updateItem(ctx, update{
		pk: "RATE#" + source, sk: "W#" + strconv.FormatInt(window.Unix(), 10),
		set: expression.Add(count, expression.Value(1)).
			Set(expression.Name(AttrTTL), expression.Value(end.Add(time.Minute).Unix())),
		cond: expression.Or(count.AttributeNotExists(), count.LessThan(expression.Value(limit))),
	})
	if errors.Is(err, errConditionFailed) {
		wait := end.Sub(now)
		if wait < time.Second {
			wait = time.Second
		}
		return wait, ErrRateLimited
	}
	return 0, err
}

// Rejection is a submission that can never become a job (malformed, unknown
// workflow). It is kept for operators instead of being retried forever.
type Rejection struct {
	MessageID string    `dynamodbav:"message_id" json:"message_id"`
	Source    string    `dynamodbav:"source" json:"source"`
	Reason    string    `dynamodbav:"reason" json:"reason"`
	Body      string    `dynamodbav:"body" json:"body"`
	At        time.Time `dynamodbav:"at" json:"at"`
}

// rejectionRetention is how long rejected submissions are kept.
const rejectionRetention = 14 * 24 * time.Hour

// maxRejectedBody bounds the copy of a rejected body kept for operators.
const maxRejectedBody = 4096

// RecordRejection stores a rejected submission (idempotent per message id).
func (s *Store) RecordRejection(ctx context.Context, r Rejection) error {
	if r.At.IsZero() {
		r.At = s.clock.Now()
	}
	if len(r.Body) > maxRejectedBody {
		r.Body = r.Body[:maxRejectedBody] + "…"
	}
	av, err := attributevalue.MarshalMap(r)
	if err != nil {
		return fmt.Errorf("encode rejection: %w", err)
	}
	av[AttrPK] = &types.AttributeValueMemberS{Value: "REJECTED"}
	av[AttrSK] = &types.AttributeValueMemberS{Value: sortTime(r.At) + "#" + r.MessageID}
	av[AttrTTL] = &types.AttributeValueMemberN{Value: strconv.FormatInt(r.At.Add(rejectionRetention).Unix(), 10)}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}); err != nil {
		return fmt.Errorf("record rejection of %s: %w", r.MessageID, err)
	}
	return nil
}

// ListRejections returns the newest rejected submissions.
func (s *Store) ListRejections(ctx context.Context, limit int) ([]Rejection, error) {
	kc := expression.Key(AttrPK).Equal(expression.Value("REJECTED"))
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ScanIndexForward: aws.Bool(false),
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit))
	}
	res, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("list rejections: %w", err)
	}
	var out []Rejection
	if err := attributevalue.UnmarshalListOfMaps(res.Items, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// JobTTL returns the expiry (Unix seconds) set on a job's record, 0 when none.
func (s *Store) JobTTL(ctx context.Context, id string) (int64, error) {
	it, err := s.getJobItem(ctx, id)
	if err != nil {
		return 0, err
	}
	return it.TTL, nil
}

// Decision is a scaling decision as recorded for a fleet.
type Decision struct {
	At        time.Time      `dynamodbav:"at" json:"at"`
	Desired   int            `dynamodbav:"desired" json:"desired"`
	Reason    string         `dynamodbav:"reason" json:"reason"`
	Victims   []string       `dynamodbav:"victims,omitempty" json:"victims,omitempty"`
	Inputs    map[string]int `dynamodbav:"inputs,omitempty" json:"inputs,omitempty"`
	InService int            `dynamodbav:"in_service" json:"in_service"`
}

// FleetState is what the store keeps per fleet besides its jobs and workers.
type FleetState struct {
	Slug    string
	Workers int
	// Desired and InService are the capacity the scaler last saw or set.
	Desired   int
	InService int
	// LastActiveAt is when the fleet last had queued or leased work.
	LastActiveAt time.Time
	LastDecision *Decision
	// History is the fleet's recent decisions, newest first (at most
	// DecisionHistory); FirstSeen is when each live instance was first seen.
	History   []Decision
	FirstSeen map[string]time.Time
	// WokenAt is the last wake-on-enqueue.
	WokenAt time.Time
}

type fleetItem struct {
	Workers      int              `dynamodbav:"workers"`
	Desired      int              `dynamodbav:"desired"`
	InService    int              `dynamodbav:"in_service"`
	LastActiveMS int64            `dynamodbav:"last_active_ms"`
	LastDecision *Decision        `dynamodbav:"last_decision"`
	History      []Decision       `dynamodbav:"history"`
	FirstSeen    map[string]int64 `dynamodbav:"first_seen"`
	WokenMS      int64            `dynamodbav:"woken_ms"`
	// DecisionSeq counts the decisions written (ticks and wakes), so a
	// wake can write only on the state it read.
	DecisionSeq int64 `dynamodbav:"decision_seq"`
}

// GetFleetState reads a fleet's state; a fleet never touched reads as zeros.
func (s *Store) GetFleetState(ctx context.Context, slug string) (FleetState, error) {
	pk, sk := fleetKey(slug)
	var it fleetItem
	if _, err := s.getItem(ctx, pk, sk, &it); err != nil {
		return FleetState{}, err
	}
	st := FleetState{
		Slug: slug, Workers: it.Workers, Desired: it.Desired, InService: it.InService,
		LastActiveAt: fromMS(it.LastActiveMS), LastDecision: it.LastDecision,
		History: it.History, WokenAt: fromMS(it.WokenMS),
	}
	if len(it.FirstSeen) > 0 {
		st.FirstSeen = make(map[string]time.Time, len(it.FirstSeen))
		for id, v := range it.FirstSeen {
			st.FirstSeen[id] = fromMS(v)
		}
	}
	return st, nil
}
