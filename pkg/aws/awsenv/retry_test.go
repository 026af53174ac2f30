package awsenv_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/local/faultproxy"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

func noWait(o *retry.StandardOptions) {
	o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
}

// throttledCalls makes n calls that are all throttled on every attempt
// through one client, and answers how many requests reached the proxy and
// whether any call gave up on the client-side retry quota.
func throttledCalls(t *testing.T, r aws.Retryer, n int) (requests int, quotaErrors int) {
	t.Helper()
	srv, err := localaws.StartDynamoDB("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	p, err := faultproxy.Start(srv.URL, faultproxy.Options{Rate: 1, Kinds: []faultproxy.Kind{faultproxy.Throttle}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	db := localaws.DynamoDBClient(p.URL, func(o *dynamodb.Options) { o.Retryer = r })
	for i := 0; i < n; i++ {
		_, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
			Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "k"}}})
		var quota ratelimit.QuotaExceededError
		switch {
		case errors.As(err, &quota) || (err != nil && strings.Contains(err.Error(), "retry quota exceeded")):
			quotaErrors++
		case err == nil:
			t.Fatal("a throttled call succeeded")
		}
	}
	return p.Calls("GetItem"), quotaErrors
}

// A burst of throttling does not starve the client: every call gets all its
// attempts, where the SDK's default retry quota gives up after about a
// hundred retries.
func TestRetryersHaveNoClientSideQuota(t *testing.T) {
	const calls = 40
	attempts := awsenv.Retries[awsenv.DynamoDB].MaxAttempts
	requests, quota := throttledCalls(t, awsenv.Retryer(awsenv.DynamoDB, noWait), calls)
	if quota != 0 || requests != calls*attempts {
		t.Fatalf("fleetq's retryer: %d requests and %d quota failures for %d calls; want %d and 0", requests, quota, calls, calls*attempts)
	}
	// The same burst with the SDK's default quota, to show what is avoided.
	requests, quota = throttledCalls(t, retry.NewStandard(noWait, func(o *retry.StandardOptions) { o.MaxAttempts = attempts }), calls)
	if quota == 0 || requests >= calls*attempts {
		t.Fatalf("the default quota: %d requests, %d quota failures; the burst did not reach it", requests, quota)
	}
}

func TestEachServiceGetsItsSettings(t *testing.T) {
	for svc, s := range awsenv.Retries {
		r := awsenv.Retryer(svc)
		if r.MaxAttempts() != s.MaxAttempts {
			t.Errorf("%s: %d attempts, want %d", svc, r.MaxAttempts(), s.MaxAttempts)
		}
		if _, adaptive := r.(*retry.AdaptiveMode); adaptive != s.Adaptive {
			t.Errorf("%s: adaptive = %v, want %v", svc, adaptive, s.Adaptive)
		}
		if s.MaxAttempts < 3 || s.MaxBackoff <= 0 || s.MaxBackoff > 5*time.Second {
			t.Errorf("%s: settings %+v outside the bounds the settings document", svc, s)
		}
	}
	if _, ok := awsenv.Retries[awsenv.EventBridge]; !ok || !awsenv.Retries[awsenv.EventBridge].Adaptive {
		t.Error("EventBridge, where throttling is expected, is not adaptive")
	}
}

// An answer that breaks off while it is read (a 200 whose body ends early)
// is retried, as a connection reset before the answer is: the call
// succeeds on its next attempt.
func TestAnAnswerThatBreaksOffIsRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if calls.Add(1) == 1 {
			// Promise more than is sent, then hang up mid-answer.
			w.Header().Set("Content-Length", "100")
			_, _ = w.Write([]byte(`{"Item":{"PK":`))
			return
		}
		_, _ = w.Write([]byte(`{"Item":{"PK":{"S":"k"}}}`))
	}))
	t.Cleanup(srv.Close)
	db := localaws.DynamoDBClient(srv.URL, func(o *dynamodb.Options) { o.Retryer = awsenv.Retryer(awsenv.DynamoDB, noWait) })
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "k"}}})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if n := calls.Load(); n != 2 || out.Item["PK"] == nil {
		t.Fatalf("%d requests, item %v; want the second attempt's answer", n, out.Item)
	}
}
