package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// Job lifecycle events (EventBridge detail-types).
const (
	EventSucceeded = "Job Succeeded"
	EventFailed    = "Job Failed" // a failed attempt that will be retried
	EventDead      = "Job Dead"
	EventCanceled  = "Job Canceled"
)

// The outbox. A transition that must be announced writes an event item in
// the same transaction as the job's own write: the announcement exists if
// and only if the transition happened, and a transition happens once (its
// condition fences any repeat), so an outcome is never announced twice as
// two different outcomes. Relays publish pending event items and then
// delete them; a relay that fails between the two publishes the same event
// again later, with the same id: delivery is at least once, and consumers
// deduplicate by event id. Event items wait in their own partition of
// IndexByState, so finding them never reads a job.
const eventRetention = 14 * 24 * time.Hour

// eventItem is an announced transition waiting for a relay. Counters are -1
// when the transition did not read the job (a completion); the relay then
// takes them from the job, which a terminal job no longer changes.
type eventItem struct {
	PK          string     `dynamodbav:"PK"`
	SK          string     `dynamodbav:"SK"`
	GSI1PK      string     `dynamodbav:"GSI1PK"`
	GSI1SK      string     `dynamodbav:"GSI1SK"`
	Type        string     `dynamodbav:"type"`
	EventID     string     `dynamodbav:"event_id"`
	EventType   string     `dynamodbav:"event_type"`
	JobID       string     `dynamodbav:"job_id"`
	AtMS        int64      `dynamodbav:"at_ms"`
	Status      string     `dynamodbav:"status"`
	Reason      string     `dynamodbav:"reason,omitempty"`
	Attempts    int        `dynamodbav:"attempts"`
	Preemptions int        `dynamodbav:"preemptions"`
	Error       *job.Error `dynamodbav:"error,omitempty"`
	LeasedMS    int64      `dynamodbav:"leased_ms,omitempty"`
	TTL         int64      `dynamodbav:"ttl"`
}

// eventType names the event a change announces, "" for none. Preemptions
// and operator retries are not outcomes: the job simply runs again.
func eventType(c change) string {
	switch c.to {
	case job.Succeeded:
		return EventSucceeded
	case job.Dead:
		return EventDead
	case job.Canceled:
		return EventCanceled
	case job.Queued:
		switch c.reason {
		case job.ReasonWorkerFailed, job.ReasonLeaseExpired, job.ReasonRunTimeout:
			return EventFailed
		}
	}
	return ""
}

// outboxItem is the event item announcing c, nil when c announces nothing.
func (s *Store) outboxItem(c change, now time.Time) map[string]types.AttributeValue {
	typ := eventType(c)
	if typ == "" {
		return nil
	}
	sk := eventSortKey(now, typ)
	e := eventItem{
		PK: eventKey(c.it.JobID), SK: sk, GSI1PK: eventsPartition, GSI1SK: timeSortKey(now, c.it.JobID),
		Type: typeEvent, EventID: c.it.JobID + "@" + sk, EventType: typ, JobID: c.it.JobID, AtMS: ms(now),
		Status: string(c.to), Reason: c.reason, Attempts: c.attempts, Preemptions: c.preemptions,
		Error: c.jobErr, LeasedMS: c.it.LeasedMS, TTL: now.Add(eventRetention).Unix(),
	}
	if c.keepCounters {
		e.Attempts, e.Preemptions = -1, -1
	}
	av, err := attributevalue.MarshalMap(e)
	if err != nil {
		// Only plain fields: cannot fail; refuse the write rather than lose the event.
		panic(fmt.Sprintf("encode event item: %v", err))
	}
	return av
}

// JobEvent is one announced transition.
type JobEvent struct {
	// ID is stable across redelivery: consumers deduplicate by it.
	ID         string
	DetailType string
	Time       time.Time
	Detail     JobEventDetail
}

// JobEventDetail is the event's detail.
type JobEventDetail struct {
	EventID        string          `json:"event_id"`
	JobID          string          `json:"job_id"`
	TenantID       string          `json:"tenant_id"`
	WorkflowID     string          `json:"workflow_id"`
	FleetSlug      string          `json:"fleet_slug"`
	Status         string          `json:"status"`
	Reason         string          `json:"reason,omitempty"`
	Attempts       int             `json:"attempts"`
	Preemptions    int             `json:"preemptions"`
	QueuedSeconds  float64         `json:"queued_seconds"`
	RunningSeconds float64         `json:"running_seconds"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *job.Error      `json:"error,omitempty"`
	// CostUSD is an outcome's cost (docs/scaling.md, "Cost per job"),
	// absent when the job could not be priced and on a failed attempt.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// Publisher delivers events (EventBridge in AWS, an in-process bus in dev).
// It returns an error unless every event was accepted.
type Publisher interface {
	Publish(ctx context.Context, events []JobEvent) error
}

func (e *eventItem) event(j *jobItem) JobEvent {
	d := JobEventDetail{
		EventID: e.EventID, JobID: e.JobID, TenantID: j.TenantID, WorkflowID: j.WorkflowID, FleetSlug: j.Fleet,
		Status: e.Status, Reason: e.Reason, Attempts: e.Attempts, Preemptions: e.Preemptions, Error: e.Error,
	}
	leased := e.LeasedMS
	if d.Attempts < 0 {
		// Written without a read: the job is terminal and its item final.
		d.Attempts, d.Preemptions, leased = j.Attempts, j.Preemptions, j.LeasedMS
	}
	if j.FirstLeasedMS > 0 && j.FirstLeasedMS <= e.AtMS {
		d.QueuedSeconds = seconds(j.FirstLeasedMS - j.CreatedMS)
	} else {
		d.QueuedSeconds = seconds(e.AtMS - j.CreatedMS)
	}
	if leased > 0 {
		d.RunningSeconds = seconds(e.AtMS - leased)
	}
	if e.EventType == EventSucceeded && j.Result != "" {
		d.Result = json.RawMessage(j.Result)
	}
	return JobEvent{ID: e.EventID, DetailType: e.EventType, Time: fromMS(e.AtMS), Detail: d}
}

func seconds(msDelta int64) float64 {
	if msDelta < 0 {
		return 0
	}
	return float64(msDelta) / 1000
}

// RelayJob publishes a job's pending events, oldest first, and deletes them.
// The API calls it right after a reporting transition so consumers hear at
// once; RelayOutbox catches whatever that missed.
func (s *Store) RelayJob(ctx context.Context, p Publisher, jobID string) (int, error) {
	q := byPartition(eventKey(jobID))
	q.consistent = true
	items, err := queryItems[eventItem](ctx, s, q)
	if err != nil {
		return 0, fmt.Errorf("events of job %s: %w", jobID, err)
	}
	if len(items) == 0 {
		return 0, nil
	}
	j, err := s.getJobItem(ctx, jobID)
	if err != nil {
		return 0, err
	}
	evs := make([]JobEvent, len(items))
	type price struct {
		usd    float64
		priced bool
	}
	prices := make([]price, len(items))
	for i := range items {
		evs[i] = items[i].event(j)
		if isOutcome(items[i].EventType) {
			usd, ok, err := s.jobCost(ctx, j, fromMS(items[i].AtMS))
			if err != nil {
				return 0, fmt.Errorf("price job %s: %w", jobID, err)
			}
			prices[i] = price{usd, ok}
			if ok {
				evs[i].Detail.CostUSD = &usd
			}
		}
	}
	if err := p.Publish(ctx, evs); err != nil {
		return 0, fmt.Errorf("publish events of job %s: %w", jobID, err)
	}
	if err := s.fileCallbacks(ctx, j, evs); err != nil {
		// Published but not filed: the events stay, the next relay files them.
		return 0, err
	}
	for i, it := range items {
		if isOutcome(it.EventType) {
			// An outcome's removal records the job's cost and gives back
			// its tenant slot, once (costs.go, tenants.go).
			if err := s.finishOutcome(ctx, j, &items[i], prices[i].usd, prices[i].priced); err != nil {
				return len(evs), fmt.Errorf("delete published event %s: %w", it.EventID, err)
			}
			continue
		}
		if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(it.PK, it.SK)}); err != nil {
			// Published but still pending: the next relay sends it again, same id.
			return len(evs), fmt.Errorf("delete published event %s: %w", it.EventID, err)
		}
	}
	return len(evs), nil
}

// RelayOutbox publishes the pending events of up to limit jobs, oldest
// first, and answers how many events went out. The scaler tick runs it, so
// an event whose immediate publish failed goes out within a minute.
func (s *Store) RelayOutbox(ctx context.Context, p Publisher, limit int) (int, error) {
	pending, err := s.queryIndex(ctx, eventsPartition, "", limit, true)
	if err != nil {
		return 0, fmt.Errorf("query outbox: %w", err)
	}
	done := map[string]bool{}
	sent := 0
	var errs []error
	for _, c := range pending {
		if done[c.JobID] {
			continue
		}
		done[c.JobID] = true
		n, err := s.RelayJob(ctx, p, c.JobID)
		sent += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return sent, errors.Join(errs...)
}
