package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// Boot reports. An agent whose machine cannot work (its runner's program
// is not on the image) reports so instead of registering; the report is
// kept beside the fleet's state, one item per instance, for a day, and the
// fleet view and fleetq doctor show the fleet's recent ones.

// BootReportRetention is how long an instance's boot report is shown.
const BootReportRetention = 24 * time.Hour

// maxBootReports bounds the reports one fleet view reads.
const maxBootReports = 100

type bootReportItem struct {
	PK           string `dynamodbav:"PK"`
	SK           string `dynamodbav:"SK"`
	Fleet        string `dynamodbav:"fleet"`
	InstanceID   string `dynamodbav:"instance_id"`
	WorkerID     string `dynamodbav:"worker_id"`
	InstanceType string `dynamodbav:"instance_type,omitempty"`
	ImageID      string `dynamodbav:"image_id,omitempty"`
	Problem      string `dynamodbav:"problem"`
	Message      string `dynamodbav:"message"`
	AgentVersion string `dynamodbav:"agent_version,omitempty"`
	ReportedMS   int64  `dynamodbav:"reported_ms"`
	TTL          int64  `dynamodbav:"ttl"`
}

// PutBootReport records an instance's boot report, replacing its earlier
// one (an agent restarted on the same machine reports again).
func (s *Store) PutBootReport(ctx context.Context, r worker.BootReport) error {
	pk, sk := bootReportKey(r.Fleet, r.InstanceID)
	it := bootReportItem{PK: pk, SK: sk, Fleet: r.Fleet, InstanceID: r.InstanceID, WorkerID: r.WorkerID, InstanceType: r.InstanceType,
		ImageID: r.ImageID, Problem: r.Problem, Message: r.Message, AgentVersion: r.AgentVersion,
		ReportedMS: ms(r.At), TTL: r.At.Add(BootReportRetention).Unix()}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("encode boot report: %w", err)
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}); err != nil {
		return fmt.Errorf("put boot report of %s in fleet %s: %w", r.InstanceID, r.Fleet, err)
	}
	return nil
}

// BootReports answers a fleet's boot reports of the last
// BootReportRetention, newest first (at most maxBootReports are read).
func (s *Store) BootReports(ctx context.Context, fleet string) ([]worker.BootReport, error) {
	pk, _ := bootReportKey(fleet, "")
	res, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :sk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: pk}, ":sk": &types.AttributeValueMemberS{Value: prefixBootReport},
		},
		Limit: aws.Int32(maxBootReports),
	})
	if err != nil {
		return nil, fmt.Errorf("query boot reports of fleet %s: %w", fleet, err)
	}
	since := s.clock.Now().Add(-BootReportRetention)
	var out []worker.BootReport
	for _, av := range res.Items {
		var it bootReportItem
		if err := attributevalue.UnmarshalMap(av, &it); err != nil {
			return nil, fmt.Errorf("decode boot report of fleet %s: %w", fleet, err)
		}
		at := fromMS(it.ReportedMS)
		if at.Before(since) {
			continue // past its retention, not yet removed by TTL
		}
		out = append(out, worker.BootReport{Fleet: it.Fleet, InstanceID: it.InstanceID, WorkerID: it.WorkerID, InstanceType: it.InstanceType,
			ImageID: it.ImageID, Problem: it.Problem, Message: it.Message, AgentVersion: it.AgentVersion, At: at})
	}
	slices.SortStableFunc(out, func(a, b worker.BootReport) int { return b.At.Compare(a.At) })
	return out, nil
}
