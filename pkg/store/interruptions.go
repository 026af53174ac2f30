package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Interruptions are counted per fleet, instance type, availability zone and
// kind (spot, rebalance, terminated) in one-minute buckets:
// PK INTR#<fleet>, SK <minute>#<kind>#<instance type>#<az>, with a `count`
// and a `ttl` of 14 days. An event is counted once: a marker item
// (PK INTR#<fleet>, SK EVT#<event id>) is put in the same transaction.

// Interruption kinds.
const (
	InterruptSpot       = "spot"
	InterruptRebalance  = "rebalance"
	InterruptTerminated = "terminated"
)

const interruptionRetention = 14 * 24 * time.Hour

// Interruption is one interruption event of a fleet's instance.
type Interruption struct {
	EventID      string
	Fleet        string
	Kind         string
	InstanceType string
	AZ           string
	At           time.Time
}

// RecordInterruption counts an interruption once per event id; it answers
// false for an event already counted.
func (s *Store) RecordInterruption(ctx context.Context, in Interruption) (bool, error) {
	if in.EventID == "" || in.Fleet == "" || in.Kind == "" {
		return false, fmt.Errorf("record interruption: event id, fleet and kind are required")
	}
	pk := "INTR#" + in.Fleet
	expires := in.At.Add(interruptionRetention).Unix()
	marker, err := attributevalue.MarshalMap(map[string]any{AttrPK: pk, AttrSK: "EVT#" + in.EventID, AttrTTL: expires})
	if err != nil {
		return false, err
	}
	bucket := fmt.Sprintf("%s#%s#%s#%s", in.At.UTC().Truncate(time.Minute).Format("20060102T1504"), in.Kind, orNone(in.InstanceType), orNone(in.AZ))
	err = s.transact(ctx,
		txItem{put: marker, putIf: expression.AttributeNotExists(expression.Name(AttrPK))},
		txItem{update: &update{pk: pk, sk: bucket,
			set: expression.Add(expression.Name("count"), expression.Value(1)).
				Set(expression.Name(AttrTTL), expression.Value(expires))}},
	)
	var tf *txFailed
	if errors.As(err, &tf) && tf.failedAt(0) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record interruption: %w", err)
	}
	return true, nil
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// InterruptionCount is one bucket's count.
type InterruptionCount struct {
	Minute       string
	Kind         string
	InstanceType string
	AZ           string
	Count        int
}

// InterruptionCounts reads a fleet's interruption buckets since a time
// (bounded by the interruptions in the window).
func (s *Store) InterruptionCounts(ctx context.Context, fleet string, since time.Time) ([]InterruptionCount, error) {
	kc := expression.Key(AttrPK).Equal(expression.Value("INTR#" + fleet)).
		And(expression.Key(AttrSK).Between(expression.Value(since.UTC().Truncate(time.Minute).Format("20060102T1504")), expression.Value("99999999T9999")))
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	var out []InterruptionCount
	for p.HasMorePages() {
		res, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query interruptions of %s: %w", fleet, err)
		}
		for _, item := range res.Items {
			var it struct {
				SK    string `dynamodbav:"SK"`
				Count int    `dynamodbav:"count"`
			}
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return nil, err
			}
			parts := strings.SplitN(it.SK, "#", 4)
			if len(parts) != 4 {
				continue
			}
			out = append(out, InterruptionCount{Minute: parts[0], Kind: parts[1], InstanceType: parts[2], AZ: parts[3], Count: it.Count})
		}
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
		if c.Kind == InterruptSpot {
			n += c.Count
		}
	}
	return n, nil
}
