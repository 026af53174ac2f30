package dynalite_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/fleetq/fleetq/pkg/local/dynalite"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// server is the dynalite the package's tests share; nil when it is not
// installed (the tests then skip and say why).
var server *dynalite.Server

func TestMain(m *testing.M) {
	dir, err := dynalite.Dir()
	if err == nil {
		server, err = dynalite.Start(dir)
	}
	if err != nil && !errors.Is(err, dynalite.ErrNotInstalled) {
		fmt.Fprintln(os.Stderr, "start dynalite:", err)
		os.Exit(1)
	}
	code := m.Run()
	if server != nil {
		server.Close()
	}
	os.Exit(code)
}

// newTable returns a client of the shared dynalite and a fresh table with a
// string key pk.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	if server == nil {
		testenv.Unavailable(t, dynalite.ErrNotInstalled.Error())
	}
	client := localaws.DynamoDBClient(server.URL)
	table := fmt.Sprintf("tx-%s-%d", t.Name(), time.Now().UnixNano())
	_, err := client.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	// dynalite makes a table ACTIVE on its next turn; each DescribeTable is
	// a round trip, so this loop is short.
	for {
		out, err := client.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Table.TableStatus == types.TableStatusActive {
			return client, table
		}
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": s(pk)}
}

func put(t *testing.T, db *dynamodb.Client, table, pk, v string) {
	t.Helper()
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s(pk), "v": n(v)},
	}); err != nil {
		t.Fatal(err)
	}
}

// value returns item pk's v, or "absent".
func value(t *testing.T, db *dynamodb.Client, table, pk string) string {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Item == nil {
		return "absent"
	}
	return out.Item["v"].(*types.AttributeValueMemberN).Value
}

func update(table, pk, cond string) *types.Update {
	u := &types.Update{
		TableName: aws.String(table), Key: key(pk),
		UpdateExpression:          aws.String("SET v = v + :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": n("1")},
	}
	if cond != "" {
		u.ConditionExpression = aws.String(cond)
	}
	return u
}

func TestTransactionRollsBackEarlierMembersAndNamesEveryFailedCondition(t *testing.T) {
	db, table := newTable(t)
	ctx := context.Background()
	put(t, db, table, "updated", "1")
	put(t, db, table, "deleted", "1")
	put(t, db, table, "checked", "1")
	put(t, db, table, "fails", "1")
	put(t, db, table, "fails-too", "7")
	put(t, db, table, "holds", "1")

	_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: update(table, "updated", "v = :one")},
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s("created"), "v": n("1")}}},
		{Delete: &types.Delete{TableName: aws.String(table), Key: key("deleted")}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("checked"),
			ConditionExpression: aws.String("attribute_exists(pk)")}},
		{Update: func() *types.Update {
			u := update(table, "fails", "v = :two")
			u.ExpressionAttributeValues[":two"] = n("2")
			u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
			return u
		}()},
		{Update: update(table, "fails-too", "v = :one")},
		{Update: update(table, "holds", "v = :one")},
	}})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Fatalf("want TransactionCanceledException, got %v", err)
	}
	want := []string{"None", "None", "None", "None", "ConditionalCheckFailed", "ConditionalCheckFailed", "None"}
	if len(tce.CancellationReasons) != len(want) {
		t.Fatalf("%d reasons, want %d: %+v", len(tce.CancellationReasons), len(want), tce.CancellationReasons)
	}
	for i, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) != want[i] {
			t.Errorf("reason %d: %s, want %s", i, aws.ToString(r.Code), want[i])
		}
	}
	if old := tce.CancellationReasons[4].Item; old == nil || old["v"].(*types.AttributeValueMemberN).Value != "1" {
		t.Errorf("ALL_OLD member's reason carries %v, want its item with v=1", old)
	}
	if tce.CancellationReasons[5].Item != nil {
		t.Errorf("a member without ReturnValuesOnConditionCheckFailure got its item: %v", tce.CancellationReasons[5].Item)
	}
	for pk, v := range map[string]string{"updated": "1", "created": "absent", "deleted": "1", "checked": "1", "fails": "1", "fails-too": "7", "holds": "1"} {
		if got := value(t, db, table, pk); got != v {
			t.Errorf("after the canceled transaction %s is %s, want %s", pk, got, v)
		}
	}

	// The same members, all conditions holding, commit together.
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: update(table, "updated", "v = :one")},
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s("created"), "v": n("1")}}},
		{Delete: &types.Delete{TableName: aws.String(table), Key: key("deleted")}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("checked"),
			ConditionExpression: aws.String("attribute_exists(pk)")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for pk, v := range map[string]string{"updated": "2", "created": "1", "deleted": "absent", "checked": "1"} {
		if got := value(t, db, table, pk); got != v {
			t.Errorf("after the committed transaction %s is %s, want %s", pk, got, v)
		}
	}
}

func TestConditionCheckOnMissingItemFailsWithoutWriting(t *testing.T) {
	db, table := newTable(t)
	_, err := db.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s("a"), "v": n("1")}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("missing"),
			ConditionExpression: aws.String("attribute_exists(pk)")}},
	}})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || aws.ToString(tce.CancellationReasons[1].Code) != "ConditionalCheckFailed" {
		t.Fatalf("want the check canceled, got %v", err)
	}
	if got := value(t, db, table, "a"); got != "absent" {
		t.Errorf("the put before the failed check stayed: a is %s", got)
	}
	if got := value(t, db, table, "missing"); got != "absent" {
		t.Errorf("the check wrote its item: %s", got)
	}
}

func TestTwoMembersOnOneItemAreRefused(t *testing.T) {
	db, table := newTable(t)
	put(t, db, table, "a", "1")
	_, err := db.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: update(table, "a", "")},
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s("a"), "v": n("5")}}},
	}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" {
		t.Fatalf("want ValidationException, got %v", err)
	}
	if got := value(t, db, table, "a"); got != "1" {
		t.Errorf("a refused transaction wrote: a is %s", got)
	}
}

func TestClientRequestTokenAnswersARepeatWithoutApplyingItAgain(t *testing.T) {
	db, table := newTable(t)
	ctx := context.Background()
	put(t, db, table, "a", "1")
	// The dynalite is shared, and its tokens with it: a token of this run.
	tok := fmt.Sprintf("t%d", time.Now().UnixNano())
	tx := func(token, pk string) error {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			ClientRequestToken: aws.String(token),
			TransactItems:      []types.TransactWriteItem{{Update: update(table, pk, "")}},
		})
		return err
	}
	for i := 0; i < 2; i++ {
		if err := tx(tok, "a"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := value(t, db, table, "a"); got != "2" {
		t.Fatalf("two calls with one token: a is %s, want 2 (applied once)", got)
	}
	var ae smithy.APIError
	if err := tx(tok, "b"); !errors.As(err, &ae) || ae.ErrorCode() != "IdempotentParameterMismatchException" {
		t.Fatalf("same token, other request: want IdempotentParameterMismatchException, got %v", err)
	}
	if err := server.AdvanceClock(dynalite.TokenWindow); err != nil {
		t.Fatal(err)
	}
	if err := tx(tok, "a"); err != nil {
		t.Fatal(err)
	}
	if got := value(t, db, table, "a"); got != "3" {
		t.Fatalf("a token past its window is a new request: a is %s, want 3", got)
	}
}

// TestCallsBesideATransactionNeverSeeItHalfDone runs transactions that add
// one to both of two items beside scans of the table: no scan may see one
// item added to and not the other.
func TestCallsBesideATransactionNeverSeeItHalfDone(t *testing.T) {
	db, table := newTable(t)
	ctx := context.Background()
	put(t, db, table, "a", "0")
	put(t, db, table, "b", "0")
	const transactions, scanners = 20, 4
	done := make(chan struct{})
	errs := make(chan error, scanners+1)
	go func() {
		defer close(done)
		for range transactions {
			if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Update: update(table, "a", "")}, {Update: update(table, "b", "")},
			}}); err != nil {
				errs <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	var scans atomic.Int64
	for range scanners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
				if err != nil {
					errs <- err
					return
				}
				scans.Add(1)
				seen := map[string]string{}
				for _, item := range out.Items {
					seen[item["pk"].(*types.AttributeValueMemberS).Value] = item["v"].(*types.AttributeValueMemberN).Value
				}
				if seen["a"] != seen["b"] {
					errs <- fmt.Errorf("a scan saw a transaction half done: %v", seen)
					return
				}
			}
		}()
	}
	wg.Wait()
	<-done
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := value(t, db, table, "a"); got != fmt.Sprint(transactions) {
		t.Errorf("a = %s after %d transactions", got, transactions)
	}
	if scans.Load() == 0 {
		t.Error("no scan ran beside the transactions")
	}
}

// TestCallerGoneMidRequestLeavesDynaliteServing sends a call whose caller
// goes away while its body is half sent: dynalite ends its process on a
// request that is cut off, so none may reach its handler.
func TestCallerGoneMidRequestLeavesDynaliteServing(t *testing.T) {
	db, table := newTable(t)
	put(t, db, table, "a", "1")
	for _, op := range []string{"GetItem", "TransactWriteItems"} {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, server.URL, pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
		req.ContentLength = 1000
		done := make(chan error, 1)
		go func() {
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				res.Body.Close()
			}
			done <- err
		}()
		if _, err := pw.Write([]byte(`{"TableName":"` + table + `","Key":{"pk":{"S":"a"}}`)); err != nil {
			t.Fatal(err)
		}
		// The caller goes: its context ends and the rest of its body never
		// comes (the transport waits for the body's reader to end).
		cancel()
		_ = pw.CloseWithError(context.Canceled)
		<-done
		// Every later call is answered.
		if got := value(t, db, table, "a"); got != "1" {
			t.Fatalf("after a %s cut off: a = %s", op, got)
		}
	}
}
