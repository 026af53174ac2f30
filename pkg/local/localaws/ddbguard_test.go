package localaws_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/local/localaws"
)

func TestItemSizeFollowsTheDocumentedRules(t *testing.T) {
	cases := []struct {
		item string
		want int
	}{
		// name bytes + UTF-8 bytes of the string
		{`{"ab":{"S":"hello"}}`, 2 + 5},
		{`{"k":{"S":"é"}}`, 1 + 2},
		// numbers: one byte per two significant digits, plus one
		{`{"n":{"N":"12345"}}`, 1 + 3 + 1},
		{`{"n":{"N":"-0.0012"}}`, 1 + 1 + 1},
		// binary: decoded bytes ("AAEC" is 3 bytes)
		{`{"b":{"B":"AAEC"}}`, 1 + 3},
		{`{"t":{"BOOL":true},"z":{"NULL":true}}`, 1 + 1 + 1 + 1},
		// list: 3 + 1 per element + elements
		{`{"l":{"L":[{"S":"ab"},{"S":"c"}]}}`, 1 + 3 + 2 + 2 + 1},
		// map: 3 + 1 per element + names + values
		{`{"m":{"M":{"x":{"S":"ab"}}}}`, 1 + 3 + 1 + 1 + 2},
		{`{"s":{"SS":["a","bc"]}}`, 1 + 1 + 2},
		// escaped characters count as their UTF-8 bytes
		{`{"q":{"S":"\"\u00e9\ud83d\ude00"}}`, 1 + 1 + 2 + 4},
		{`{"e":{"L":[]},"f":{"M":{}},"g":{"NS":["0"]}}`, 1 + 3 + 1 + 3 + 1 + 2},
	}
	for _, c := range cases {
		var item map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.item), &item); err != nil {
			t.Fatal(err)
		}
		got, err := localaws.ItemSize(item)
		if err != nil || got != c.want {
			t.Errorf("ItemSize(%s) = %d, %v; want %d", c.item, got, err, c.want)
		}
		// The guard measures only items whose wire form is past the limit,
		// which holds while no item's size exceeds its names and values as
		// written.
		wire := 0
		for name, raw := range item {
			wire += len(name) + len(raw)
		}
		if got > wire {
			t.Errorf("ItemSize(%s) = %d, more than its wire form's %d bytes", c.item, got, wire)
		}
	}
}

// An item whose wire form is past the limit but whose size is within it
// (every quote is escaped: two bytes on the wire, one counted) is stored;
// the same item with its size past the limit is not.
func TestItemsAreSizedByWhatTheyHoldNotHowTheyAreWritten(t *testing.T) {
	ctx := context.Background()
	db, table := limitTable(t)
	quotes := func(pk string, size int) map[string]types.AttributeValue {
		item := sized(pk, size)
		item["data"] = &types.AttributeValueMemberS{Value: strings.Repeat(`"`, len(item["data"].(*types.AttributeValueMemberS).Value))}
		return item
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: quotes("a", localaws.MaxItemBytes)}); err != nil {
		t.Fatalf("an item of exactly the limit, twice that on the wire: %v", err)
	}
	if got := get(t, db, table, "a"); got == nil || len(got["data"].(*types.AttributeValueMemberS).Value) != localaws.MaxItemBytes-len("PKadata") {
		t.Fatal("the item of exactly the limit did not come back whole")
	}
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: quotes("b", localaws.MaxItemBytes+1)})
	if !isValidation(err, "Item size has exceeded the maximum allowed size") {
		t.Fatalf("PutItem one byte over = %v, want ValidationException", err)
	}
}

func limitTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	srv, err := localaws.StartDynamoDB("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	db := localaws.DynamoDBClient(srv.URL)
	table := "limits"
	_, err = db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("PK"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("PK"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	return db, table
}

// blob returns an item PK=pk, data=<n bytes> whose size is exactly size.
func sized(pk string, size int) map[string]types.AttributeValue {
	n := size - len("PK") - len(pk) - len("data")
	return map[string]types.AttributeValue{
		"PK":   &types.AttributeValueMemberS{Value: pk},
		"data": &types.AttributeValueMemberS{Value: strings.Repeat("x", n)},
	}
}

func TestEmbeddedDynamoDBRefusesItemsOverTheLimit(t *testing.T) {
	ctx := context.Background()
	db, table := limitTable(t)

	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: sized("a", localaws.MaxItemBytes)}); err != nil {
		t.Fatalf("an item of exactly the limit: %v", err)
	}
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: sized("b", localaws.MaxItemBytes+1)})
	if !isValidation(err, "Item size has exceeded the maximum allowed size") {
		t.Fatalf("PutItem one byte over = %v, want ValidationException", err)
	}
	if got := get(t, db, table, "b"); got != nil {
		t.Fatal("the refused put was stored")
	}

	// An update that grows an item past the limit changes nothing.
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: sized("c", localaws.MaxItemBytes-10)}); err != nil {
		t.Fatal(err)
	}
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &table, Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "c"}},
		UpdateExpression:          aws.String("SET extra = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: strings.Repeat("y", 100)}},
	})
	if !isValidation(err, "Item size to update has exceeded the maximum allowed size") {
		t.Fatalf("UpdateItem past the limit = %v, want ValidationException", err)
	}
	if got := get(t, db, table, "c"); got == nil || got["extra"] != nil {
		t.Fatalf("the refused update changed the item: %v", got)
	}

	// In a transaction the whole write is undone: the new item "d" too.
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &table, Item: sized("d", 100)}},
		{Update: &types.Update{TableName: &table, Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "c"}},
			UpdateExpression:          aws.String("SET extra = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: strings.Repeat("y", 100)}}}},
	}})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 ||
		aws.ToString(tce.CancellationReasons[0].Code) != "None" || aws.ToString(tce.CancellationReasons[1].Code) != "ValidationError" {
		t.Fatalf("TransactWriteItems past the limit = %v, want TransactionCanceledException [None, ValidationError]", err)
	}
	if get(t, db, table, "d") != nil {
		t.Fatal("the canceled transaction's put was kept")
	}
	if got := get(t, db, table, "c"); got["extra"] != nil {
		t.Fatal("the canceled transaction's update was kept")
	}

	// Within the limit, updates and transactions go through unchanged.
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &table, Item: sized("d", 100)}},
		{Update: &types.Update{TableName: &table, Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "c"}},
			UpdateExpression:          aws.String("SET extra = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "y"}}}},
	}})
	if err != nil {
		t.Fatalf("a transaction within the limit: %v", err)
	}
	if get(t, db, table, "d") == nil || get(t, db, table, "c")["extra"] == nil {
		t.Fatal("the transaction within the limit was not applied")
	}
}

func isValidation(err error, msg string) bool {
	return err != nil && strings.Contains(err.Error(), "ValidationException") && strings.Contains(err.Error(), msg)
}

func get(t *testing.T, db *dynamodb.Client, table, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func TestTransactionTokensMakeRepeatsIdempotent(t *testing.T) {
	ctx := context.Background()
	db, table := limitTable(t)
	tx := func(token, pk string) error {
		in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: &table, Item: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}},
				ConditionExpression: aws.String("attribute_not_exists(PK)")}},
			{Update: &types.Update{TableName: &table, Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "counter"}},
				UpdateExpression:          aws.String("ADD n :one"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}},
		}}
		if token != "" {
			in.ClientRequestToken = aws.String(token)
		}
		_, err := db.TransactWriteItems(ctx, in)
		return err
	}
	counter := func() string {
		return get(t, db, table, "counter")["n"].(*types.AttributeValueMemberN).Value
	}
	if err := tx("tok-1", "a"); err != nil {
		t.Fatal(err)
	}
	// The repeat meets its own write: success, applied once.
	if err := tx("tok-1", "a"); err != nil {
		t.Fatalf("the repeat with the same token = %v, want success", err)
	}
	if n := counter(); n != "1" {
		t.Fatalf("counter = %s after a repeated transaction, want 1", n)
	}
	// The same token with other parameters is refused.
	err := tx("tok-1", "b")
	var mismatch *types.IdempotentParameterMismatchException
	if !errors.As(err, &mismatch) {
		t.Fatalf("same token, other parameters = %v, want IdempotentParameterMismatchException", err)
	}
	if get(t, db, table, "b") != nil {
		t.Fatal("the mismatched repeat was applied")
	}
	// A new token is a new transaction: its condition fails on the existing item.
	var tce *types.TransactionCanceledException
	if err := tx("tok-2", "a"); !errors.As(err, &tce) {
		t.Fatalf("a new token on the same write = %v, want TransactionCanceledException", err)
	}
}
