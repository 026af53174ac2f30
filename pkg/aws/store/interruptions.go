package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
)

// Interruptions are counted per fleet, instance type, availability zone and
// kind (spot, rebalance, terminated) in one-minute buckets:
// PK INTR#<fleet>, SK <minute>#<kind>#<instance type>#<az>, with a `count`
// and a `ttl` of 14 days. An event is counted once: a marker item
// (PK INTR#<fleet>, SK EVT#<event id>) is put in the same transaction.

const interruptionRetention = 14 * 24 * time.Hour

// RecordInterruption counts an interruption once per event id; it answers
// false for an event already counted.
func (s *Store) RecordInterruption(ctx context.Context, in fleetstate.Interruption) (bool, error) {
	items, err := interruptionItems(in)
	if err != nil {
		return false, err
	}
	err = s.transact(ctx, items...)
	var tf *txFailed
	if errors.As(err, &tf) && tf.failed(memberMarker) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record interruption: %w", err)
	}
	return true, nil
}

// interruptionItems are the two writes that count an interruption once:
// the event's marker, put only if absent, and the bucket's increment.
func interruptionItems(in fleetstate.Interruption) ([]txItem, error) {
	if in.EventID == "" || in.Fleet == "" || in.Kind == "" {
		return nil, fmt.Errorf("record interruption: event id, fleet and kind are required")
	}
	pk := interruptionsPartition(in.Fleet)
	expires := in.At.Add(interruptionRetention).Unix()
	marker, err := attributevalue.MarshalMap(map[string]any{AttrPK: pk, AttrSK: interruptionMarker(in.EventID), AttrTTL: expires})
	if err != nil {
		return nil, err
	}
	bucket := interruptionBucket(in.At, in.Kind, in.InstanceType, in.AZ)
	return []txItem{
		{name: memberMarker, put: marker, putIf: expression.AttributeNotExists(expression.Name(AttrPK))},
		{name: memberBucket, update: &update{pk: pk, sk: bucket,
			set: expression.Add(expression.Name(attrCount), expression.Value(1)).
				Set(expression.Name(AttrTTL), expression.Value(expires))}},
	}, nil
}

// InterruptionCounts reads a fleet's interruption buckets since a time
// (bounded by the interruptions in the window).
func (s *Store) InterruptionCounts(ctx context.Context, fleet string, since time.Time) ([]fleetstate.InterruptionCount, error) {
	q := byPartition(interruptionsPartition(fleet))
	q.key = q.key.And(expression.Key(AttrSK).Between(expression.Value(interruptionMinute(since)), expression.Value(lastInterruptionMinute)))
	buckets, err := queryItems[struct {
		SK    string `dynamodbav:"SK"`
		Count int    `dynamodbav:"count"`
	}](ctx, s, q)
	if err != nil {
		return nil, fmt.Errorf("interruptions of %s: %w", fleet, err)
	}
	var out []fleetstate.InterruptionCount
	for _, it := range buckets {
		c, ok := parseInterruptionBucket(it.SK)
		if !ok {
			continue // an event marker
		}
		c.Count = it.Count
		out = append(out, c)
	}
	return out, nil
}

// SpotInterruptions sums a fleet's Spot interruption warnings since a time.
func (s *Store) SpotInterruptions(ctx context.Context, fleet string, since time.Time) (int, error) {
	cs, err := s.InterruptionCounts(ctx, fleet, since)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cs {
		if c.Kind == fleetstate.InterruptSpot {
			n += c.Count
		}
	}
	return n, nil
}
