package dynalite_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// The tests below send one expression many times with other values, as
// fleetq's store does: each answer must be the one for that call's values,
// not for the call that parsed the expression first (scripts/dynalite/parsecache.js).

func TestRepeatedExpressionsUseEachCallsValues(t *testing.T) {
	db, table := newTable(t)
	ctx := context.Background()
	put(t, db, table, "a", "1")
	put(t, db, table, "b", "5")

	// One condition and one update, values changing every call: the
	// condition holds only for the value the item has now.
	for i, want := range []struct {
		pk, expect, add string
		ok              bool
		after           string
	}{
		{"a", "1", "2", true, "3"},
		{"a", "1", "2", false, "3"}, // v is 3 now
		{"a", "3", "4", true, "7"},
		{"b", "5", "1", true, "6"},
		{"b", "7", "1", false, "6"},
	} {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key(want.pk),
			UpdateExpression:          aws.String("SET #v = #v + :add"),
			ConditionExpression:       aws.String("#v = :expect"),
			ExpressionAttributeNames:  map[string]string{"#v": "v"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":add": n(want.add), ":expect": n(want.expect)},
		})
		var failed *types.ConditionalCheckFailedException
		switch {
		case want.ok && err != nil:
			t.Fatalf("call %d: %v", i, err)
		case !want.ok && !errors.As(err, &failed):
			t.Fatalf("call %d: want ConditionalCheckFailedException, got %v", i, err)
		}
		if got := value(t, db, table, want.pk); got != want.after {
			t.Fatalf("call %d: %s's v is %s, want %s", i, want.pk, got, want.after)
		}
	}

	// One key condition, another partition each call.
	for _, pk := range []string{"a", "b", "a", "missing"} {
		out, err := db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk)},
			ConsistentRead:            aws.Bool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if pk == "missing" {
			want = 0
		}
		if len(out.Items) != want {
			t.Fatalf("query %s: %d items, want %d", pk, len(out.Items), want)
		}
		if want == 1 && out.Items[0]["pk"].(*types.AttributeValueMemberS).Value != pk {
			t.Fatalf("query %s answered %v", pk, out.Items[0]["pk"])
		}
	}
}

func TestRepeatedExpressionsAreCheckedOnEveryCall(t *testing.T) {
	db, table := newTable(t)
	ctx := context.Background()
	put(t, db, table, "a", "1")

	validation := func(t *testing.T, err error, says string) {
		t.Helper()
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" || !strings.Contains(api.ErrorMessage(), says) {
			t.Fatalf("want ValidationException saying %q, got %v", says, err)
		}
	}
	cond := func(expr string, values map[string]types.AttributeValue) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s("a"), "v": n("1")},
			ConditionExpression: aws.String(expr), ExpressionAttributeValues: values,
		})
		return err
	}

	// The same condition, once with a value it does not use: refused each
	// time, whatever was accepted before. The first call is an update whose
	// update expression uses :one before its condition is parsed.
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key("a"),
		UpdateExpression:          aws.String("SET v = :one"),
		ConditionExpression:       aws.String("v = :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": n("1")},
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := cond("v = :one", map[string]types.AttributeValue{":one": n("1")}); err != nil {
			t.Fatal(err)
		}
		validation(t, cond("v = :one", map[string]types.AttributeValue{":one": n("1"), ":spare": n("2")}), "unused in expressions")
	}

	// A value of another type is checked again: begins_with takes strings.
	if err := cond("begins_with(pk, :p)", map[string]types.AttributeValue{":p": s("a")}); err != nil {
		t.Fatal(err)
	}
	validation(t, cond("begins_with(pk, :p)", map[string]types.AttributeValue{":p": n("1")}), "Incorrect operand type")

	// BETWEEN's bounds are compared on every call.
	if err := cond("v BETWEEN :lo AND :hi", map[string]types.AttributeValue{":lo": n("0"), ":hi": n("2")}); err != nil {
		t.Fatal(err)
	}
	validation(t, cond("v BETWEEN :lo AND :hi", map[string]types.AttributeValue{":lo": n("2"), ":hi": n("0")}), "upper bound to be greater than or equal to lower bound")
}
