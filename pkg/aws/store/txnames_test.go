package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// A canceled transaction names the members whose condition failed, and
// only those; a caller tests names, not positions.
func TestACanceledTransactionNamesTheConditionsThatFailed(t *testing.T) {
	t.Parallel()
	srv, err := localaws.StartDynamoDB("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ctx := context.Background()
	db := localaws.DynamoDBClient(srv.URL)
	if err := CreateTable(ctx, db, "names"); err != nil {
		t.Fatal(err)
	}
	s := New(db, Options{Table: "names"})
	set := func(pk string) *update {
		return &update{pk: pk, sk: "X", set: expression.Set(expression.Name("n"), expression.Value(1))}
	}
	if err := s.transact(ctx, txItem{name: memberJob, update: set("a")}); err != nil {
		t.Fatal(err)
	}
	absent := expression.AttributeNotExists(expression.Name(AttrPK))
	job, worker, slot := set("a"), set("b"), set("c")
	job.cond, slot.cond = absent, absent
	err = s.transact(ctx, txItem{name: memberJob, update: job}, txItem{name: memberWorker, update: worker}, txItem{name: memberLeaseSlot, update: slot})
	var tf *txFailed
	if !errors.As(err, &tf) {
		t.Fatalf("transact = %v, want a canceled transaction", err)
	}
	if !tf.failed(memberJob) || tf.failed(memberWorker) || tf.failed(memberLeaseSlot) || !tf.only(memberJob) {
		t.Fatalf("failed members %v, want the job's alone", tf.names)
	}
	if !strings.Contains(err.Error(), `the condition on job failed`) {
		t.Fatalf("error %q does not name the failed condition", err)
	}
}
