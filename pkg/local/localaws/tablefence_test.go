package localaws_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Tests running in parallel share one embedded DynamoDB: one makes and
// drops its tables while another writes to, reads and describes its own.
// Under the race detector (as make test runs it) this fails if a table
// operation is not kept apart from the other calls.
func TestTablesComeAndGoWhileOthersAreWritten(t *testing.T) {
	db, table := limitTable(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(2)
	errs := make(chan error, 2)
	go func() {
		defer wg.Done()
		for i := range 10 {
			name := fmt.Sprintf("churn-%d", i)
			if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
				TableName:            aws.String(name),
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS}},
				KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash}},
				BillingMode:          types.BillingModePayPerRequest,
			}); err != nil {
				errs <- fmt.Errorf("create %s: %w", name, err)
				return
			}
			if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
				errs <- fmt.Errorf("delete %s: %w", name, err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 40 {
			key := map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: fmt.Sprint(i % 4)}}
			if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key}); err != nil {
				errs <- fmt.Errorf("put: %w", err)
				return
			}
			if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key}); err != nil {
				errs <- fmt.Errorf("get: %w", err)
				return
			}
			if _, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
				errs <- fmt.Errorf("describe: %w", err)
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
