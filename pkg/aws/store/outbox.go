package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// The outbox. A transition that must be announced writes an event item in
// the same transaction as the job's own write: the announcement exists if
// and only if the transition happened, and a transition happens once (its
// condition fences any repeat), so an outcome is never announced twice as
// two different outcomes. Relays publish pending event items and then
// delete them; a relay that fails between the two publishes the same event
// again later, with the same id: delivery is at least once, and consumers
// deduplicate by event id.
//
// Event items are spread over outboxShards partitions of the table,
// OUTBOX#<n>, the job's shard a hash of its id, each job's events together
// and oldest first under the job's id: no partition key takes the whole
// stage's outcomes, finding a job's events is one query of its shard, and
// finding every pending event is one query per shard (at once), never an
// index read, so an event item writes no index entry. A previous release
// filed each event under EVENT#<job id> and in the E# partition of
// IndexByState; both are still read, so what it left is relayed, in order
// with the same job's later events (docs/data-model.md, "The outbox").
const eventRetention = 14 * 24 * time.Hour

// outboxShards is how many partitions the outbox spreads over. It is fixed:
// a job's relay reads its one shard, so changing it would hide the events
// filed under the old count from the relay of their job (the sweep would
// still find those in shards it reads).
const outboxShards = 8

// outboxShardOf is the outbox shard of a job's events.
func outboxShardOf(jobID string) int { return shardOf(jobID, outboxShards) }

// eventItem is an announced transition waiting for a relay. Counters are -1
// when the transition did not read the job (a completion); the relay then
// takes them from the job, which a terminal job no longer changes.
type eventItem struct {
	PK string `dynamodbav:"PK"`
	SK string `dynamodbav:"SK"`
	// GSI1PK and GSI1SK file an event a previous release wrote in the E#
	// partition of IndexByState; today's events are in no index.
	GSI1PK      string     `dynamodbav:"GSI1PK,omitempty"`
	GSI1SK      string     `dynamodbav:"GSI1SK,omitempty"`
	Type        string     `dynamodbav:"type"`
	EventID     string     `dynamodbav:"event_id"`
	EventType   string     `dynamodbav:"event_type"`
	JobID       string     `dynamodbav:"job_id"`
	AtMS        int64      `dynamodbav:"at_ms"`
	Status      string     `dynamodbav:"status"`
	Reason      job.Reason `dynamodbav:"reason,omitempty"`
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
		PK: outboxPartition(outboxShardOf(c.it.JobID)), SK: outboxSortKey(c.it.JobID, sk),
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
	items, err := s.pendingEvents(ctx, jobID)
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

// pendingEvents reads a job's pending events, oldest first, from both
// places they can be, at once: the job's outbox shard, and the partition a
// previous release filed them in.
func (s *Store) pendingEvents(ctx context.Context, jobID string) ([]eventItem, error) {
	shard := byPartition(outboxPartition(outboxShardOf(jobID)))
	shard.key = shard.key.And(expression.Key(AttrSK).BeginsWith(jobID + "#"))
	// Another job's id may begin with this one's and a "#".
	ofJob := expression.Name(attrJobID).Equal(expression.Value(jobID))
	shard.filter = &ofJob
	old := byPartition(eventKey(jobID))
	shard.consistent, old.consistent = true, true
	got, err := s.readEvents(ctx, []query{old, shard})
	if err != nil {
		return nil, err
	}
	items := slices.Concat(got...)
	// An event's id is its job's id, its time and its kind: in time order.
	slices.SortStableFunc(items, func(a, b eventItem) int { return strings.Compare(a.EventID, b.EventID) })
	return items, nil
}

// readEvents runs the queries of event items at once and answers their
// items, in the order of the queries.
func (s *Store) readEvents(ctx context.Context, qs []query) ([][]eventItem, error) {
	return eachShard(qs, func(q query) ([]eventItem, error) { return queryItems[eventItem](ctx, s, q) })
}

// RelayOutbox publishes the pending events of up to limit jobs, oldest
// first, and answers how many events went out. The scaler tick runs it, so
// an event whose immediate publish failed goes out within a minute.
func (s *Store) RelayOutbox(ctx context.Context, p Publisher, limit int) (int, error) {
	pending, err := s.pendingJobs(ctx, limit)
	if err != nil {
		return 0, fmt.Errorf("query outbox: %w", err)
	}
	sent := 0
	var errs []error
	for _, jobID := range pending {
		n, err := s.RelayJob(ctx, p, jobID)
		sent += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return sent, errors.Join(errs...)
}

// pendingJobs reads the head of every outbox shard, and of the E#
// partition a previous release filed its events in, at once, and answers
// the jobs with pending events among them, at most limit, the one with the
// oldest event first. Each shard's head holds a share of limit; a shard
// with more is read further by the next call.
func (s *Store) pendingJobs(ctx context.Context, limit int) ([]string, error) {
	old := byState(eventsPartition)
	old.limit = limit
	qs := []query{old}
	for n := range outboxShards {
		q := byPartition(outboxPartition(n))
		if limit > 0 {
			q.limit = ceilDiv(limit, outboxShards)
		}
		qs = append(qs, q)
	}
	got, err := s.readEvents(ctx, qs)
	if err != nil {
		return nil, err
	}
	oldest := map[string]string{} // job id -> the time of its oldest event read
	for i, items := range got {
		for _, it := range items {
			at := it.GSI1SK // a previous release's: <time>#<job id>
			if i > 0 {
				at = sortTime(fromMS(it.AtMS))
			}
			if prev, ok := oldest[it.JobID]; !ok || at < prev {
				oldest[it.JobID] = at
			}
		}
	}
	jobs := make([]string, 0, len(oldest))
	for id := range oldest {
		jobs = append(jobs, id)
	}
	slices.SortFunc(jobs, func(a, b string) int {
		if c := strings.Compare(oldest[a], oldest[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if limit > 0 && len(jobs) > limit {
		jobs = jobs[:limit]
	}
	return jobs, nil
}
