package system_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	awsevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	samples "github.com/fleetq/fleetq/events"
	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/interruption"
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/apifn"
	"github.com/fleetq/fleetq/pkg/service/system/dispatchfn"
	"github.com/fleetq/fleetq/pkg/service/system/interruptionfn"
	"github.com/fleetq/fleetq/pkg/service/system/scalerfn"
)

// wiring is one way of building the four functions: the Lambda mains' or
// the dev stack's. The same scenario runs through both.
type wiring struct {
	// register answers the status and the worker token.
	register func(t *testing.T, body string) (int, string)
	// poll answers the job the worker with the token leases ("" for none).
	poll      func(t *testing.T, token string) string
	cancel    func(t *testing.T, jobID string) int
	published func() []string
	dispatch  func(context.Context, awsevents.SQSEvent) (awsevents.SQSEventResponse, error)
	interrupt func(context.Context, awsevents.CloudWatchEvent) (any, error)
	tick      func(context.Context, awsevents.CloudWatchEvent) (any, error)
	store     *store.Store
	desired   func(t *testing.T) int
	metrics   *bytes.Buffer
}

// The spot warning sample's instance.
const spotInstance = "i-0abc1234def567890"

func sample[T any](t *testing.T, name string) T {
	t.Helper()
	data, err := samples.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// registerBody is the registration sample's body, as it is: its worker
// runs on the instance the EC2 samples name.
func registerBody(t *testing.T) string {
	req := sample[awsevents.APIGatewayV2HTTPRequest](t, "apigw-v2-worker-register.json")
	var body struct {
		InstanceID string `json:"instance_id"`
	}
	if err := json.Unmarshal([]byte(req.Body), &body); err != nil || body.InstanceID != spotInstance {
		t.Fatalf("the registration sample's instance is %q (%v), not the EC2 samples' %s: replaying them would drain no worker", body.InstanceID, err, spotInstance)
	}
	return req.Body
}

// scenario replays the samples: a worker registers, a submission batch
// arrives at a fleet at zero (dispatch wakes it and records why), the
// worker leases the job, its instance gets a Spot warning (the worker is
// drained and the job requeued without spending an attempt), and the
// scheduled tick runs.
func scenario(t *testing.T, w wiring) {
	ctx := context.Background()
	code, token := w.register(t, registerBody(t))
	if (code != http.StatusCreated && code != http.StatusOK) || token == "" {
		t.Fatalf("register answered %d", code)
	}
	resp, err := w.dispatch(ctx, sample[awsevents.SQSEvent](t, "sqs-submission-batch.json"))
	if err != nil {
		t.Fatalf("dispatch: %v", err)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("dispatch failures %+v", resp.BatchItemFailures)
	}
	if _, err := w.store.GetJob(ctx, "acme:render-0001"); err != nil {
		t.Fatalf("the sample's job was not stored: %v", err)
	}
	if d := w.desired(t); d < 1 {
		t.Fatalf("the fleet's group has desired %d after work arrived at zero", d)
	}
	st, err := w.store.GetFleetState(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if st.LastDecision == nil || !strings.HasPrefix(st.LastDecision.Reason.String(), "woken by") {
		t.Fatalf("last decision after the wake: %+v", st.LastDecision)
	}

	if leased := w.poll(t, token); leased != "acme:render-0001" {
		t.Fatalf("the worker leased %q, want the sample's job", leased)
	}

	// The warning arrives now: the tick counts the last minute's.
	warning := sample[awsevents.CloudWatchEvent](t, "ec2-spot-interruption-warning.json")
	warning.Time = time.Now().UTC()
	sum, err := w.interrupt(ctx, warning)
	if err != nil {
		t.Fatalf("interruption: %v", err)
	}
	data, _ := json.Marshal(sum)
	var s interruption.Summary
	if err := json.Unmarshal(data, &s); err != nil || s.WorkerID != spotInstance || !s.Drained || s.Requeued != 1 {
		t.Fatalf("interruption summary %s (%v), want the worker on %s drained and its job requeued", data, err, spotInstance)
	}
	if wk, err := w.store.GetWorker(ctx, spotInstance); err != nil || wk.Status != worker.Draining {
		t.Fatalf("the worker after the warning: %+v, %v; want draining", wk, err)
	}
	if j, err := w.store.GetJob(ctx, "acme:render-0001"); err != nil || j.Status != job.Queued || j.Attempts != 0 || j.Preemptions != 1 {
		t.Fatalf("the job after the warning: %+v, %v; want queued again, no attempt spent, one preemption", j, err)
	}

	out, err := w.tick(ctx, sample[awsevents.CloudWatchEvent](t, "schedule-tick.json"))
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	data, _ = json.Marshal(out)
	var ticked scalerfn.TickSummary
	if err := json.Unmarshal(data, &ticked); err != nil || len(ticked.Fleets) == 0 {
		t.Fatalf("tick summary %s (%v)", data, err)
	}
	// Each fleet's reason in the answer is the one its decision recorded.
	for _, f := range ticked.Fleets {
		st, err := w.store.GetFleetState(ctx, f.Fleet)
		if err != nil || st.LastDecision == nil || st.LastDecision.Reason.String() != f.Reason {
			t.Fatalf("tick answered %s's reason %q, recorded %+v (%v)", f.Fleet, f.Reason, st.LastDecision, err)
		}
	}
	if got := metric(t, w.metrics, "demo", "SpotInterruptionCount"); got != 1 {
		t.Fatalf("SpotInterruptionCount of demo = %v, want 1; metric lines:\n%s", got, w.metrics)
	}

	// The producer (its tenant's IAM role; the operator outside AWS)
	// cancels the job: its event reaches the stage's bus.
	if code := w.cancel(t, "acme:render-0001"); code != http.StatusOK {
		t.Fatalf("cancel answered %d", code)
	}
	found := false
	for _, d := range w.published() {
		found = found || strings.Contains(d, "render-0001")
	}
	if !found {
		t.Fatalf("no event of render-0001 reached the bus: %q", w.published())
	}
}

// leasedJob is the job id of a poll's answer, "" when it leased none.
func leasedJob(t *testing.T, status int, body []byte) string {
	t.Helper()
	if status == http.StatusNoContent {
		return ""
	}
	var p wire.PollResponse
	if err := json.Unmarshal(body, &p); err != nil || status != http.StatusOK || p.Job == nil {
		t.Fatalf("poll answered %d %s (%v)", status, body, err)
	}
	return p.Job.JobID
}

// metric finds a fleet's value of one metric in Embedded Metric Format lines.
func metric(t *testing.T, lines *bytes.Buffer, fleet, name string) float64 {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(lines.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("metric line %q: %v", sc.Text(), err)
		}
		if rec["FleetSlug"] != fleet {
			continue
		}
		if v, ok := rec[name].(float64); ok {
			return v
		}
	}
	return -1
}

// lambdaAWSEnv sets the SDK's environment as Lambda gives it a function:
// the region and credentials (here the embedded servers'), no instance
// metadata.
func lambdaAWSEnv(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// TestLambdaWiring builds every function exactly as its main does, from a
// Lambda environment pointing at embedded AWS endpoints, and replays the
// samples through the handlers lambda.Start would call.
func TestLambdaWiring(t *testing.T) {
	ctx := context.Background()
	lambdaAWSEnv(t)
	_, table := testenv.DynamoDB(t)
	sqsSrv, err := localaws.SharedSQS("")
	if err != nil {
		t.Fatal(err)
	}
	q, err := localaws.SQSClient(sqsSrv.URL).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(table + "-submissions")})
	if err != nil {
		t.Fatal(err)
	}
	asg, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	defer asg.Close()
	asg.PutGroup(localaws.ASGGroup{Name: "fleetq-dev-demo", Max: 4})
	// The worker's instance, launching in the fleet's group, attests with
	// credentials of the fleet's worker role that STS issued it.
	asg.AddInstance("fleetq-dev-demo", localaws.ASGInstance{ID: spotInstance, LifecycleState: "Pending"})
	sts, err := localaws.StartSTS("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sts.Close()
	instanceCreds := sts.Issue(localaws.STSCaller{Role: "fleetq-dev-demo-worker", Session: spotInstance})
	jsonAPI, err := localaws.StartJSONAPI("")
	if err != nil {
		t.Fatal(err)
	}
	defer jsonAPI.Close()
	// The demo fleet's own secret (accept_secret), by ARN, as the API function reads it.
	const secretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:DemoFleetSecret-AbCdEf"
	jsonAPI.PutSecretValue(secretARN, "sample-fleet-secret")
	// The console key, a secret of its own.
	const consoleKeyARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ConsoleKey-AbCdEf"
	jsonAPI.PutSecretValue(consoleKeyARN, "sample-console-key")
	// EC2's Spot price history, which the scaler reads for the cost of jobs.
	acct, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	defer acct.Close()
	acct.PutSpotPrice(localaws.SpotPrice{InstanceType: "g5.xlarge", Zone: "us-east-1a", USD: 0.4521, At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})

	vars := map[string]string{
		awsenv.EnvStage: "dev", awsenv.EnvTable: table, awsenv.EnvLogLevel: "warn",
		awsenv.EnvDynamoDBEndpoint: testenv.DynamoDBEndpoint(t), awsenv.EnvSQSEndpoint: sqsSrv.URL,
		awsenv.EnvAutoScalingEndpoint: asg.URL, awsenv.EnvSecretsManagerEndpoint: jsonAPI.URL, awsenv.EnvEventBridgeEndpoint: jsonAPI.URL,
		awsenv.EnvSubmitQueueURL: aws.ToString(q.QueueUrl),
		awsenv.EnvConsoleKeyARN:  consoleKeyARN,
		awsenv.EnvEventBus:       "fleetq-dev", awsenv.EnvFleetGroups: `{"demo":"fleetq-dev-demo"}`,
		awsenv.EnvEC2Endpoint:  acct.URL,
		awsenv.EnvFleetSecrets: `{"demo":"` + secretARN + `"}`,
		awsenv.EnvWorkerRoles:  `{"demo":"` + localaws.RoleARN("fleetq-dev-demo-worker") + `"}`, awsenv.EnvSTSEndpoint: sts.URL,
	}
	// Each function is built as its main builds it, from its own Lambda.
	var metrics bytes.Buffer
	build := func(fn system.Function) any {
		h, err := system.BuildLambda(ctx, fn, func(k string) string { return vars[k] }, &metrics, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	// The test reads the store the functions write, through a Lambda of its own.
	l, err := system.LoadLambda(ctx, awsenv.Interruption, func(k string) string { return vars[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	apiH := build(apifn.Function).(func(context.Context, awsevents.APIGatewayV2HTTPRequest) (awsevents.APIGatewayV2HTTPResponse, error))
	dispatchH := build(dispatchfn.Function).(func(context.Context, awsevents.SQSEvent) (awsevents.SQSEventResponse, error))
	scalerH := build(scalerfn.Function).(func(context.Context, awsevents.CloudWatchEvent) (scalerfn.TickSummary, error))
	interruptH := build(interruptionfn.Function).(func(context.Context, awsevents.CloudWatchEvent) (interruption.Summary, error))

	scenario(t, wiring{
		register: func(t *testing.T, body string) (int, string) {
			// As an agent on EC2 registers: attested, no secret.
			req := sample[awsevents.APIGatewayV2HTTPRequest](t, "apigw-v2-worker-register.json")
			for k := range req.Headers {
				if strings.EqualFold(k, wire.HeaderFleetSecret) {
					delete(req.Headers, k)
				}
			}
			id, err := attest.Sign(ctx, credentials.StaticCredentialsProvider{Value: instanceCreds}, sts.URL, "us-east-1", "dev", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			req.Headers[wire.HeaderIdentity] = wire.EncodeIdentity(id)
			req.Body = body
			resp, err := apiH(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			var reg wire.RegisterResponse
			_ = json.Unmarshal([]byte(resp.Body), &reg)
			return resp.StatusCode, reg.Token
		},
		poll: func(t *testing.T, token string) string {
			req := sample[awsevents.APIGatewayV2HTTPRequest](t, "apigw-v2-worker-register.json")
			for k := range req.Headers {
				if strings.EqualFold(k, wire.HeaderFleetSecret) {
					delete(req.Headers, k)
				}
			}
			req.RawPath, req.RequestContext.HTTP.Path = "/api/worker/poll", "/api/worker/poll"
			req.RouteKey, req.RequestContext.RouteKey = "POST /api/worker/poll", "POST /api/worker/poll"
			req.Headers["authorization"] = "Bearer " + token
			req.Body = "{}"
			resp, err := apiH(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			return leasedJob(t, resp.StatusCode, []byte(resp.Body))
		},
		cancel: func(t *testing.T, jobID string) int {
			req := sample[awsevents.APIGatewayV2HTTPRequest](t, "apigw-v2-submit-job-iam.json")
			req.RawPath, req.RequestContext.HTTP.Path = "/api/jobs/"+jobID+"/cancel", "/api/jobs/"+jobID+"/cancel"
			req.RouteKey, req.RequestContext.RouteKey = "POST /api/jobs/{job_id}/cancel", "POST /api/jobs/{job_id}/cancel"
			req.Body, req.IsBase64Encoded = "{}", false
			resp, err := apiH(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			return resp.StatusCode
		},
		published: func() []string {
			var out []string
			for _, e := range jsonAPI.Events() {
				if e.EventBusName == "fleetq-dev" {
					out = append(out, e.Detail)
				}
			}
			return out
		},
		dispatch:  dispatchH,
		interrupt: func(ctx context.Context, ev awsevents.CloudWatchEvent) (any, error) { return interruptH(ctx, ev) },
		tick:      func(ctx context.Context, ev awsevents.CloudWatchEvent) (any, error) { return scalerH(ctx, ev) },
		store:     l.Store,
		desired:   func(*testing.T) int { return asg.Desired("fleetq-dev-demo") },
		metrics:   &metrics,
	})
	consoleLoginOnce(t, apiH, signing.KeyID("sample-console-key"))
	// The scenario's ticks read the demo fleet's Spot prices.
	spot, err := l.Store.SpotPrices(ctx, "demo")
	if err != nil || spot.USD["g5.xlarge/us-east-1a"] != 0.4521 {
		t.Fatalf("Spot prices after the ticks: %+v, %v; want g5.xlarge in us-east-1a at 0.4521", spot, err)
	}
}

// TestDevStackWiring replays the same samples through the dev stack, whose
// functions come from the same constructors.
func TestDevStackWiring(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var metrics bytes.Buffer
	stack, err := devstack.Start(ctx, devstack.Options{
		Addr: "127.0.0.1:0", Config: fleetconfig.Default(), DynamoDBEndpoint: testenv.StackDynamoDB(t),
		Logger: slog.New(slog.DiscardHandler), RelayInterval: -1,
		Fleet: devstack.FleetOptions{Tick: -1, Metrics: &metrics},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	scenario(t, wiring{
		register: func(t *testing.T, body string) (int, string) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, stack.URL+"/api/worker/register", strings.NewReader(body))
			req.Header.Set("X-Fleet-Secret", stack.FleetSecrets["demo"])
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var reg wire.RegisterResponse
			_ = json.NewDecoder(resp.Body).Decode(&reg)
			return resp.StatusCode, reg.Token
		},
		poll: func(t *testing.T, token string) string {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, stack.URL+"/api/worker/poll", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return leasedJob(t, resp.StatusCode, body)
		},
		cancel: func(t *testing.T, jobID string) int {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, stack.URL+"/api/jobs/"+jobID+"/cancel", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+stack.OperatorToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		},
		published: func() []string {
			var out []string
			for _, e := range stack.Events.Recent(100) {
				data, _ := json.Marshal(e)
				out = append(out, string(data))
			}
			return out
		},
		dispatch:  stack.Dispatch.Handle,
		interrupt: stack.DeliverEvent,
		tick:      stack.DeliverEvent,
		store:     stack.Store,
		desired: func(t *testing.T) int {
			g, err := stack.Fleet.Describe(ctx, "demo")
			if err != nil {
				t.Fatal(err)
			}
			return g.Desired
		},
		metrics: &metrics,
	})
}

// consoleLoginOnce signs in to the console through the API function as an
// IAM operator: the login is signed with the console key (named by its id),
// works once, and its session opens the fleets page.
func consoleLoginOnce(t *testing.T, apiH func(context.Context, awsevents.APIGatewayV2HTTPRequest) (awsevents.APIGatewayV2HTTPResponse, error), keyID string) {
	t.Helper()
	ctx := context.Background()
	req := sample[awsevents.APIGatewayV2HTTPRequest](t, "apigw-v2-submit-job-iam.json")
	req.RawPath, req.RequestContext.HTTP.Path = "/api/admin/console-session", "/api/admin/console-session"
	req.RouteKey, req.RequestContext.RouteKey = "POST /api/admin/console-session", "POST /api/admin/console-session"
	req.Body, req.IsBase64Encoded = "{}", false
	// An operator's session: the sample's role acts for tenant acme, and a
	// tenant's principal is refused on the operator routes.
	req.RequestContext.Authorizer.IAM.UserARN = "arn:aws:sts::123456789012:assumed-role/fleetq-ops/alice"
	resp, err := apiH(ctx, req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("console-session = %d %s, %v", resp.StatusCode, resp.Body, err)
	}
	var login struct{ Path string }
	if err := json.Unmarshal([]byte(resp.Body), &login); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(login.Path)
	if err != nil || !strings.HasPrefix(u.Query().Get("token"), keyID+".") {
		t.Fatalf("login %q is not signed with the console key %s", login.Path, keyID)
	}
	get := func(path, rawQuery, cookie string) awsevents.APIGatewayV2HTTPResponse {
		t.Helper()
		r := awsevents.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: "GET " + path, RawPath: path, RawQueryString: rawQuery,
			Headers: map[string]string{"host": "api.example.com"}, RequestContext: awsevents.APIGatewayV2HTTPRequestContext{
				HTTP: awsevents.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: path, SourceIP: "203.0.113.9"}}}
		if cookie != "" {
			r.Cookies = []string{cookie}
		}
		resp, err := apiH(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := get(u.Path, u.RawQuery, "")
	if first.StatusCode != 303 || len(first.Cookies) != 1 {
		t.Fatalf("login = %d with cookies %v", first.StatusCode, first.Cookies)
	}
	if again := get(u.Path, u.RawQuery, ""); again.StatusCode != 401 {
		t.Fatalf("the login again = %d, want 401", again.StatusCode)
	}
	cookie, _, _ := strings.Cut(first.Cookies[0], ";")
	if page := get("/console/fleets", "", cookie); page.StatusCode != 200 {
		t.Fatalf("fleets with the session = %d", page.StatusCode)
	}
}
