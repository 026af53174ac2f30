package devstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// With Chaos the stack's DynamoDB calls go through a fault proxy that fails
// that share of them; the SDK's retries carry the stack's writes and reads
// through, and the faults are counted. At 10%, a call whose six attempts
// all fail is a one-in-a-million draw, and 80 calls without a fault one in
// five thousand.
func TestChaosInjectsFaultsTheStackSurvives(t *testing.T) {
	t.Parallel()
	stack, err := devstack.Start(context.Background(), devstack.Options{Addr: "127.0.0.1:0", Config: fleetconfig.Default(), DynamoDBEndpoint: testenv.StackDynamoDB(t),
		Logger: slog.New(slog.DiscardHandler), Chaos: 0.1, RelayInterval: -1,
		// The service's attempts, without the waits between them.
		DynamoDBOptions: []func(*dynamodb.Options){func(o *dynamodb.Options) {
			o.Retryer = awsenv.Retryer(awsenv.DynamoDB, func(so *retry.StandardOptions) {
				so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		}},
		Fleet: devstack.FleetOptions{Tick: -1, NoLocalFleet: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 40
	for i := range n {
		id := fmt.Sprintf("chaos-%d", i)
		if _, _, err := stack.Store.CreateJob(ctx, job.Spec{ID: id, TenantID: "t", WorkflowID: "demo-sleep", Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatalf("create %s through the faults: %v", id, err)
		}
	}
	for i := range n {
		if j, err := stack.Store.GetJob(ctx, fmt.Sprintf("chaos-%d", i)); err != nil || j.Status != job.Queued {
			t.Fatalf("job %d: %+v, %v", i, j.Status, err)
		}
	}
	faults := 0
	for _, k := range stack.ChaosFaults()["dynamodb"] {
		faults += k
	}
	if faults == 0 {
		t.Fatalf("no DynamoDB fault injected in %d calls at 10%%: %v", 2*n, stack.ChaosFaults())
	}
	t.Logf("chaos: %v", stack.ChaosFaults())

	if _, err := devstack.Start(context.Background(), devstack.Options{Addr: "127.0.0.1:0", Config: fleetconfig.Default(),
		Logger: slog.New(slog.DiscardHandler), Chaos: 1.5, Fleet: devstack.FleetOptions{Tick: -1, NoLocalFleet: true}}); err == nil {
		t.Fatal("a chaos rate above 1 was accepted")
	}
}
