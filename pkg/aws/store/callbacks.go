package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// Callbacks. When the relay publishes a terminal outcome of a job that has
// a callback URL, it also files a callback item (PK HOOK#<job>, SK the
// event id) in the hooks partition of IndexByState, sorted by when the next
// delivery is due. The webhook deliverer reads the due ones, POSTs them and
// records each attempt here: the callback item moves to its next due time,
// or goes once delivered or given up, and the job's `callback` attribute
// says how the latest outcome's delivery went (GET /api/jobs/{id}). Filing
// is idempotent (a relay that fails after filing files nothing twice), so
// each outcome is delivered at least once, never as two different outcomes.

// callbackState is a job's `callback` attribute.
type callbackState struct {
	EventID       string `dynamodbav:"event_id"`
	State         string `dynamodbav:"state"`
	Attempts      int    `dynamodbav:"attempts"`
	DeliveredMS   int64  `dynamodbav:"delivered_ms,omitempty"`
	FailedMS      int64  `dynamodbav:"failed_ms,omitempty"`
	NextAttemptMS int64  `dynamodbav:"next_attempt_ms,omitempty"`
	LastError     string `dynamodbav:"last_error,omitempty"`
}

func (c *callbackState) toJob() *job.Callback {
	if c == nil {
		return nil
	}
	return &job.Callback{EventID: c.EventID, State: c.State, Attempts: c.Attempts, DeliveredAt: fromMS(c.DeliveredMS),
		FailedAt: fromMS(c.FailedMS), NextAttemptAt: fromMS(c.NextAttemptMS), LastError: c.LastError}
}

// callbackItem is one outcome waiting for delivery.
type callbackItem struct {
	PK        string `dynamodbav:"PK"`
	SK        string `dynamodbav:"SK"`
	GSI1PK    string `dynamodbav:"GSI1PK"`
	GSI1SK    string `dynamodbav:"GSI1SK"`
	Type      string `dynamodbav:"type"`
	JobID     string `dynamodbav:"job_id"`
	EventID   string `dynamodbav:"event_id"`
	URL       string `dynamodbav:"url"`
	Event     string `dynamodbav:"event"`
	Attempts  int    `dynamodbav:"attempts"`
	NextMS    int64  `dynamodbav:"next_ms"`
	LastError string `dynamodbav:"last_error,omitempty"`
	TTL       int64  `dynamodbav:"ttl"`
}

// MaxCallbackErrorBytes bounds the last error a job's callback records.
const MaxCallbackErrorBytes = 1024

// callbackRetention bounds how long an undeliverable callback item can
// linger (the deliverer gives up long before).
const callbackRetention = 14 * 24 * time.Hour

func terminalEvent(e JobEvent) bool {
	return e.DetailType == EventSucceeded || e.DetailType == EventDead || e.DetailType == EventCanceled
}

// fileCallbacks files the terminal events of a job with a callback URL for
// delivery and marks the job's callback pending.
func (s *Store) fileCallbacks(ctx context.Context, j *jobItem, evs []JobEvent) error {
	if j.CallbackURL == "" {
		return nil
	}
	now := s.clock.Now()
	for _, e := range evs {
		if !terminalEvent(e) {
			continue
		}
		raw, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode callback of %s: %w", e.ID, err)
		}
		it := callbackItem{
			PK: callbackKey(j.JobID), SK: e.ID, GSI1PK: callbacksPartition, GSI1SK: callbackSortKey(now, j.JobID, e.ID),
			Type: typeCallback, JobID: j.JobID, EventID: e.ID, URL: j.CallbackURL, Event: string(raw),
			NextMS: ms(now), TTL: now.Add(callbackRetention).Unix(),
		}
		av, err := attributevalue.MarshalMap(it)
		if err != nil {
			return fmt.Errorf("encode callback of %s: %w", e.ID, err)
		}
		cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))).Build()
		if err != nil {
			return err
		}
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av,
			ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()})
		if isConditionFailed(err) {
			continue // filed by an earlier relay of the same event
		}
		if err != nil {
			return fmt.Errorf("file callback of %s: %w", e.ID, err)
		}
		if err := s.setCallbackState(ctx, j.JobID, callbackState{EventID: e.ID, State: job.CallbackPending, NextAttemptMS: ms(now)}); err != nil {
			return err
		}
	}
	return nil
}

// setCallbackState records a delivery's state on the job; a job already
// expired is left alone.
func (s *Store) setCallbackState(ctx context.Context, jobID string, st callbackState) error {
	pk, sk := jobKey(jobID)
	err := s.updateItem(ctx, update{pk: pk, sk: sk,
		set:  expression.Set(expression.Name(attrCallback), expression.Value(st)),
		cond: expression.AttributeExists(expression.Name(AttrPK))})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("record callback of job %s: %w", jobID, err)
	}
	return nil
}

// DueCallbacks answers up to limit callbacks whose next delivery is due,
// longest due first.
func (s *Store) DueCallbacks(ctx context.Context, limit int) ([]Callback, error) {
	now := s.clock.Now()
	due, err := s.queryIndex(ctx, callbacksPartition, sortTime(now)+"#~", limit, true)
	if err != nil {
		return nil, fmt.Errorf("query due callbacks: %w", err)
	}
	out := make([]Callback, 0, len(due))
	for _, d := range due {
		var it callbackItem
		found, err := s.getItem(ctx, d.PK, d.SK, &it)
		if err != nil {
			return nil, err
		}
		if !found || it.NextMS > ms(now) {
			continue // delivered or moved on since the index was read
		}
		var e JobEvent
		if err := json.Unmarshal([]byte(it.Event), &e); err != nil {
			return nil, fmt.Errorf("decode callback %s: %w", it.EventID, err)
		}
		out = append(out, Callback{JobID: it.JobID, URL: it.URL, Event: e, Attempts: it.Attempts})
	}
	return out, nil
}

// RecordCallback records one delivery attempt of c: delivered or given up,
// the callback is done; otherwise it waits until r.NextAt. The job's
// callback attribute shows the outcome either way.
func (s *Store) RecordCallback(ctx context.Context, c Callback, r CallbackResult) error {
	now := s.clock.Now()
	if len(r.Err) > MaxCallbackErrorBytes {
		r.Err = r.Err[:MaxCallbackErrorBytes]
	}
	attempts := c.Attempts + 1
	pk, sk := callbackKey(c.JobID), c.Event.ID
	st := callbackState{EventID: c.Event.ID, Attempts: attempts, LastError: r.Err}
	switch {
	case r.Delivered:
		st.State, st.DeliveredMS, st.LastError = job.CallbackDelivered, ms(now), ""
	case r.NextAt.IsZero():
		st.State, st.FailedMS = job.CallbackFailed, ms(now)
	default:
		st.State, st.NextAttemptMS = job.CallbackPending, ms(r.NextAt)
	}
	if st.State == job.CallbackPending {
		set := expression.Set(expression.Name(attrAttempts), expression.Value(attempts)).
			Set(expression.Name(attrNextMS), expression.Value(ms(r.NextAt))).
			Set(expression.Name(attrLastError), expression.Value(r.Err)).
			Set(expression.Name(AttrGSI1SK), expression.Value(callbackSortKey(r.NextAt, c.JobID, c.Event.ID)))
		err := s.updateItem(ctx, update{pk: pk, sk: sk, set: set, cond: expression.AttributeExists(expression.Name(AttrPK))})
		if isConditionFailed(err) {
			return nil // another delivery finished it
		}
		if err != nil {
			return fmt.Errorf("reschedule callback %s: %w", c.Event.ID, err)
		}
	} else if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk)}); err != nil {
		return fmt.Errorf("finish callback %s: %w", c.Event.ID, err)
	}
	return s.setCallbackState(ctx, c.JobID, st)
}
