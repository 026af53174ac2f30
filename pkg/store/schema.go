package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Table layout. The CDK app and the local stack create the table from these
// names, so code and infrastructure cannot drift apart.
const (
	AttrPK  = "PK"
	AttrSK  = "SK"
	AttrTTL = "ttl"

	// IndexByState (GSI1) groups jobs by fleet and state, and workers by fleet.
	IndexByState = "by-state"
	AttrGSI1PK   = "GSI1PK"
	AttrGSI1SK   = "GSI1SK"

	// IndexByInstance (GSI2) finds a worker by its EC2 instance id.
	IndexByInstance = "by-instance"
	AttrGSI2PK      = "GSI2PK"
	AttrGSI2SK      = "GSI2SK"
)

// ByStateProjection lists the non-key attributes copied into IndexByState:
// enough to choose candidates and count work without reading whole items
// (job inputs and results stay out of the index).
var ByStateProjection = []string{
	"job_id", "tenant_id", "workflow_id", "status", "priority", "attempts", "max_attempts",
	"preemptions", "worker_id", "lease_token", "lease_expires_ms", "not_before_ms",
	"created_ms", "updated_ms", "first_leased_ms", "queue_timeout_s", "timeout_s", "leased_ms",
	"reason", "error_code",
	"fleet", "instance_id", "instance_type", "az", "wstatus", "approved", "leases",
	"max_concurrency", "last_seen_ms", "registered_ms", "last_release_ms", "last_claim_ms",
}

// ByInstanceProjection lists the non-key attributes copied into IndexByInstance.
var ByInstanceProjection = []string{"worker_id", "fleet"}

// CreateTableInput describes the table for the local stack and the tests
// (on-demand billing; the CDK app declares the same keys and indexes).
func CreateTableInput(table string) *dynamodb.CreateTableInput {
	str := func(name string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS}
	}
	keys := func(pk, sk string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
		}
	}
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{str(AttrPK), str(AttrSK), str(AttrGSI1PK), str(AttrGSI1SK), str(AttrGSI2PK), str(AttrGSI2SK)},
		KeySchema:            keys(AttrPK, AttrSK),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{
				IndexName:  aws.String(IndexByState),
				KeySchema:  keys(AttrGSI1PK, AttrGSI1SK),
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: ByStateProjection},
			},
			{
				IndexName:  aws.String(IndexByInstance),
				KeySchema:  keys(AttrGSI2PK, AttrGSI2SK),
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: ByInstanceProjection},
			},
		},
	}
}

// Item keys.
func jobKey(id string) (string, string)     { return "JOB#" + id, "JOB" }
func workerKey(id string) (string, string)  { return "WORKER#" + id, "WORKER" }
func fleetKey(slug string) (string, string) { return "FLEET#" + slug, "STATE" }

// Partitions of IndexByState. A job is always in exactly one of them: the
// state changes move it by rewriting GSI1PK/GSI1SK, never by removing them.
func readyPartition(fleet string) string   { return "Q#" + fleet }
func delayedPartition(fleet string) string { return "D#" + fleet }
func leasedPartition(fleet string) string  { return "L#" + fleet }
func workersPartition(fleet string) string { return "W#" + fleet }
func instancePartition(inst string) string { return "I#" + inst }
func terminalPartition(fleet string, s string) string {
	switch s {
	case "succeeded":
		return "S#" + fleet
	case "dead":
		return "X#" + fleet
	default:
		return "C#" + fleet
	}
}

// sortTime renders t so that string order is time order.
func sortTime(t time.Time) string { return t.UTC().Format("20060102T150405.000Z") }

// readySortKey orders the ready queue: highest priority first, then oldest.
func readySortKey(priority int, created time.Time, id string) string {
	return fmt.Sprintf("%04d#%s#%s", 1000-priority, sortTime(created), id)
}

func timeSortKey(t time.Time, id string) string { return sortTime(t) + "#" + id }

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// TableAdmin is the part of the DynamoDB API that creates tables.
type TableAdmin interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateTable creates the table (for the local stack and tests; the CDK app
// owns it in AWS), turns on TTL where the endpoint supports it, and waits
// until it is active. An existing table is left as it is.
func CreateTable(ctx context.Context, db TableAdmin, table string) error {
	_, err := db.CreateTable(ctx, CreateTableInput(table))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	for {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("describe table %s: %w", table, err)
		}
		// Emulators that create tables synchronously report no status.
		if s := out.Table.TableStatus; s == "" || s == types.TableStatusActive {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	// Best effort: DynamoDB Local and some emulators do not implement TTL.
	_, _ = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrTTL), Enabled: aws.Bool(true)},
	})
	return nil
}
