package api_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/faultproxy"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// DynamoDB throttling (or a 5xx, or broken connections) that outlasts the
// SDK's retries answers 503 unavailable with Retry-After, not 500 internal.
// The stack reaches DynamoDB through the endpoint its options name, here a
// fault proxy, which also shows that the option reaches the stack.
func TestExhaustedAWSRetriesAnswerUnavailableWithRetryAfter(t *testing.T) {
	t.Parallel()
	ddb, err := localaws.StartDynamoDB("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ddb.Close() })
	p, err := faultproxy.Start(ddb.URL, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	h := newHarness(t, func(o *devstack.Options) {
		o.DynamoDBEndpoint = p.URL
		o.DynamoDBOptions = append(o.DynamoDBOptions, func(do *dynamodb.Options) {
			do.Retryer = awsenv.Retryer(awsenv.DynamoDB, func(so *retry.StandardOptions) {
				so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		})
	})
	if p.Calls("CreateTable") == 0 {
		t.Fatal("the stack did not use the DynamoDB endpoint of its options")
	}
	token := h.register("w1", "gpu")

	for _, kind := range []faultproxy.Kind{faultproxy.Throttle, faultproxy.Unavailable, faultproxy.ResetBefore} {
		p.SetOptions(faultproxy.Options{Rate: 1, Ops: []string{"GetItem", "Query"}, Kinds: []faultproxy.Kind{kind}})
		for _, r := range []reply{h.do("GET", "/api/jobs/missing", "op", nil), h.do("POST", "/api/worker/poll", token, map[string]any{"current_load": 0})} {
			h.want(r, 503, "unavailable")
			if got := r.header.Get("Retry-After"); got != "2" {
				t.Errorf("%s: Retry-After %q, want 2", kind, got)
			}
		}
		p.SetOptions(faultproxy.Options{})
	}
	if r := h.do("GET", "/api/jobs/missing", "op", nil); r.status != 404 {
		t.Fatalf("without faults: %d %s", r.status, r.raw)
	}
}
