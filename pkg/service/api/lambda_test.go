package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	awsevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	samples "github.com/fleetq/fleetq/events"
	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/aws/sqsqueue"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/api"
	"github.com/fleetq/fleetq/pkg/service/system"
)

// TestLambdaAdapterServesSampleEvents sends the API Gateway (payload v2)
// samples in events/ through the same adapter and handler functions/api
// runs, with the IAM operator check of the AWS deployment.
func TestLambdaAdapterServesSampleEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := fleetconfig.Default()
	// The sample's caller is a session of the role the stage maps to acme.
	cfg.Tenants = append(cfg.Tenants, fleetconfig.Tenant{ID: "acme", Principals: []string{"arn:aws:iam::123456789012:role/producers/render-producer"}})
	db, table := testenv.DynamoDB(t)
	sqsSrv, err := localaws.SharedSQS("")
	if err != nil {
		t.Fatal(err)
	}
	sqsClient := localaws.SQSClient(sqsSrv.URL)
	q, err := sqsClient.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(table + "-submissions")})
	if err != nil {
		t.Fatal(err)
	}
	consoleKeys, err := signing.NewStatic("console-key")
	if err != nil {
		t.Fatal(err)
	}
	sys, err := system.New(cfg, db, table, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(cfg, sys.Store,
		sqsqueue.Queue{Client: sqsClient, URL: aws.ToString(q.QueueUrl)}, consoleKeys, auth.IAMOperator{},
		clock.Real{}, slog.New(slog.DiscardHandler),
		api.Config{FleetSecrets: auth.StaticFleetSecrets{"demo": {"sample-fleet-secret"}}})
	if err != nil {
		t.Fatal(err)
	}
	proxy := httpadapter.NewV2(h)
	invoke := func(name string) (int, map[string]any) {
		t.Helper()
		data, err := samples.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var req awsevents.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(data, &req); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp, err := proxy.ProxyWithContext(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ct := resp.Headers["Content-Type"]; !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("%s: content type %q", name, ct)
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
			t.Fatalf("%s: body %q: %v", name, resp.Body, err)
		}
		return resp.StatusCode, body
	}

	status, body := invoke("apigw-v2-worker-register.json")
	if status != 201 || !strings.HasPrefix(body["token"].(string), "fqw1.") {
		t.Fatalf("register: %d %v", status, body)
	}
	w, err := sys.Store.GetWorker(ctx, "i-0abc1234def567890")
	if err != nil || w.SourceIP != "203.0.113.7" {
		t.Fatalf("registered worker %+v, %v: want the request context's source IP", w, err)
	}

	status, body = invoke("apigw-v2-submit-job-no-identity.json")
	if status != 401 || body["error"].(map[string]any)["code"] != "unauthenticated" {
		t.Fatalf("submit without an IAM identity: %d %v", status, body)
	}
	status, body = invoke("apigw-v2-submit-job-iam.json")
	if status != 202 || body["job_id"] != "acme:render-0001" {
		t.Fatalf("submit with an IAM identity: %d %v", status, body)
	}
	msgs, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs.Messages) != 1 || !strings.Contains(aws.ToString(msgs.Messages[0].Body), `"acme:render-0001"`) {
		t.Fatalf("queue holds %d messages, want exactly the accepted submission", len(msgs.Messages))
	}
}

func TestNewRequiresEveryDependency(t *testing.T) {
	cfg, st, q, op, log := fleetconfig.Default(), struct{ api.Store }{}, sqsqueue.Queue{}, auth.IAMOperator{}, slog.New(slog.DiscardHandler)
	keys, err := signing.NewStatic("console-key")
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() (http.Handler, error){
		"fleet config": func() (http.Handler, error) { return api.New(nil, st, q, keys, op, clock.Real{}, log, api.Config{}) },
		"store":        func() (http.Handler, error) { return api.New(cfg, nil, q, keys, op, clock.Real{}, log, api.Config{}) },
		"queue":        func() (http.Handler, error) { return api.New(cfg, st, nil, keys, op, clock.Real{}, log, api.Config{}) },
		"signing keys": func() (http.Handler, error) { return api.New(cfg, st, q, nil, op, clock.Real{}, log, api.Config{}) },
		"operator":     func() (http.Handler, error) { return api.New(cfg, st, q, keys, nil, clock.Real{}, log, api.Config{}) },
		"clock":        func() (http.Handler, error) { return api.New(cfg, st, q, keys, op, nil, log, api.Config{}) },
		"logger":       func() (http.Handler, error) { return api.New(cfg, st, q, keys, op, clock.Real{}, nil, api.Config{}) },
		"registration limit": func() (http.Handler, error) {
			return api.New(cfg, st, q, keys, op, clock.Real{}, log, api.Config{RegisterLimit: -1})
		},
	} {
		if h, err := f(); err == nil || h != nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New without a good %s: %v, %v", name, h, err)
		}
	}
	if h, err := api.New(cfg, st, q, keys, op, clock.Real{}, log, api.Config{}); err != nil || h == nil {
		t.Fatalf("New with every dependency: %v, %v", h, err)
	}
}
