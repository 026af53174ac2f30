package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fleetq/fleetq/pkg/aws/assets"
	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/sqsqueue"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/faultproxy"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/localfleet"
	"github.com/fleetq/fleetq/pkg/service/dispatch"
	"github.com/fleetq/fleetq/pkg/service/interruption"
	"github.com/fleetq/fleetq/pkg/service/jobevents"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/apifn"
	"github.com/fleetq/fleetq/pkg/service/webhook"
)

// Options configure a dev stack.
type Options struct {
	// Addr is where the API listens (default 127.0.0.1:8080; ":0" picks a port).
	Addr   string
	Config *fleetconfig.Config
	// OperatorToken is generated when empty.
	OperatorToken string
	// ConsoleKey signs operator console sessions; generated when empty
	// (signing.Generate), as the stack generates it in AWS. It is no other
	// key.
	ConsoleKey string
	// WebhookKey signs job callbacks; generated when empty, likewise.
	WebhookKey string
	// FleetSecrets are the secrets of the fleets whose config accepts
	// one (accept_secret), by slug; one is generated for each such fleet
	// not given here. Workers of other fleets register by attestation only.
	FleetSecrets map[string]string
	// RegisterLimit is registrations per minute per source address (default: the config's).
	RegisterLimit int
	// Clock is what the functions, the local fleet and the local agents
	// read as now. The local triggers (the event source mapping's receives
	// and the relay's and the scaler's schedules) pace in wall-clock
	// time, as AWS's do.
	Clock  clock.Clock
	Logger *slog.Logger
	// VisibilityTimeout of submissions being dispatched (default 30s) and
	// MaxReceives before a submission goes to the dead-letter queue (default 5).
	VisibilityTimeout time.Duration
	MaxReceives       int
	// DynamoDBOptions are applied to the stack's DynamoDB client (benchmarks
	// count requests with awsenv.CountRequests).
	DynamoDBOptions []func(*dynamodb.Options)
	// SQSOptions are applied to the stack's SQS client.
	SQSOptions []func(*sqs.Options)
	// RelayInterval is how often the outbox relay drains job events to the
	// stack's bus (default 500ms; negative: never, announcements only).
	RelayInterval time.Duration
	// Fleet configures the scaler and the local fleet.
	Fleet FleetOptions
	// NoAnnounce stops the API from publishing a job's events right after
	// its transition, leaving them to the relay (benchmarks use it to count
	// the lifecycle's own requests apart from the announcement's).
	NoAnnounce bool
	// Publisher, when set, receives the job events instead of the stack's
	// in-process bus (Events then stays empty): the soak sends them to the
	// embedded EventBridge API through the real SDK client.
	Publisher store.Publisher
	// DynamoDBEndpoint, SQSEndpoint and S3Endpoint name the services the
	// stack uses (dynalite, a fault proxy in front of another server).
	// Empty, each is read from its variable (awsenv.EnvDynamoDBEndpoint,
	// awsenv.EnvSQSEndpoint, awsenv.EnvS3Endpoint), and without one the
	// stack serves its own: a DynamoDB-API and an S3-API server per
	// stack, and the process's one SQS-API server (localaws.SharedSQS).
	// Tests pass them here rather than through the environment, so that
	// stacks of tests running in parallel may differ.
	DynamoDBEndpoint, SQSEndpoint, S3Endpoint string
	// Chaos, between 0 and 1, puts a fault proxy (pkg/local/faultproxy) in
	// front of the stack's DynamoDB and SQS that fails that share of calls
	// at random: throttling, 500, 503, latency, connections reset before
	// and after the service acted (`fleetq dev --chaos`).
	Chaos float64
}

// EventHandler handles one EventBridge event and answers a JSON-able summary.
type EventHandler func(context.Context, events.CloudWatchEvent) (any, error)

// Stack is a running dev stack.
type Stack struct {
	URL string
	// API is the API's handler as the api function serves it behind API
	// Gateway; tests wrap it in the Lambda adapter to send it API Gateway
	// events (an IAM caller's identity among them).
	API           http.Handler
	OperatorToken string
	ConsoleKey    string
	WebhookKey    string
	// FleetSecrets are the fleets' own secrets (fleets that accept one).
	FleetSecrets map[string]string
	// STS is the embedded STS that attested registrations are forwarded
	// to; it issues each local instance its credentials.
	STS    *localaws.STS
	Config *fleetconfig.Config
	// Env is what the stack's functions are built from (pkg/service/system, as in
	// AWS); Store and Relay are its.
	Env      *system.Env
	Store    *store.Store
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
	Table    string
	QueueURL string
	DLQURL   string
	Dispatch *dispatch.Handler
	// Events is the in-process event bus job lifecycle events go to
	// (GET /local/events/recent); Relay moves them there from the outbox.
	Events *jobevents.Bus
	Relay  *jobevents.Relay

	// Scaler ticks every fleet; Fleet is the local fleet it scales (nil
	// with FleetOptions.NoLocalFleet).
	Scaler *scaler.Scaler
	Fleet  *localfleet.Fleet
	// Interruptions handles the EC2 and Auto Scaling events (docs/scaling.md)
	// posted to /local/events.
	Interruptions *interruption.Handler

	// S3 holds job inputs and outputs in Bucket; Assets presigns its URLs.
	S3     *s3.Client
	Bucket string
	Assets *assets.S3

	log      *slog.Logger
	agents   agents
	server   *http.Server
	ddb      *localaws.Server
	s3srv    *localaws.Server
	chaos    map[string]*faultproxy.Proxy // by service, with Options.Chaos
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.RWMutex
	handlers map[string]EventHandler
	// dispatched are the channels Dispatched handed out.
	dispatched []chan struct{}
}

// Start brings the stack up and returns once the API answers.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if o.Config == nil {
		o.Config = fleetconfig.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.OperatorToken == "" {
		o.OperatorToken = auth.RandomSecret(24)
	}
	if o.ConsoleKey == "" {
		o.ConsoleKey = signing.Generate()
	}
	if o.WebhookKey == "" {
		o.WebhookKey = signing.Generate()
	}
	consoleKeys, err := signing.NewStatic(o.ConsoleKey)
	if err != nil {
		return nil, fmt.Errorf("console key: %w", err)
	}
	webhookKeys, err := signing.NewStatic(o.WebhookKey)
	if err != nil {
		return nil, fmt.Errorf("webhook key: %w", err)
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:8080"
	}
	if o.VisibilityTimeout <= 0 {
		o.VisibilityTimeout = 30 * time.Second
	}
	if o.MaxReceives <= 0 {
		o.MaxReceives = 5
	}
	s := &Stack{OperatorToken: o.OperatorToken, ConsoleKey: o.ConsoleKey, WebhookKey: o.WebhookKey, Config: o.Config, log: o.Logger, handlers: map[string]EventHandler{},
		FleetSecrets: map[string]string{}}
	for _, f := range o.Config.Fleets {
		if f.AcceptSecret {
			s.FleetSecrets[f.Slug] = o.FleetSecrets[f.Slug]
			if s.FleetSecrets[f.Slug] == "" {
				s.FleetSecrets[f.Slug] = auth.RandomSecret(24)
			}
		}
	}
	if err := s.startBackends(ctx, o); err != nil {
		s.Close()
		return nil, err
	}
	s.Events = &jobevents.Bus{Keep: 1000}
	var pub store.Publisher = s.Events
	if o.Publisher != nil {
		pub = o.Publisher
	}
	env, err := system.New(o.Config, s.DynamoDB, s.Table, o.Clock, o.Logger, pub)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Env = env
	// The dev stack's receivers run on this machine: its deliveries may
	// reach loopback (never in AWS, where the guard admits public addresses only).
	if err := system.EnableWebhooks(s.Env, webhookKeys, webhook.Guard{AllowLoopback: true}); err != nil {
		s.Close()
		return nil, err
	}
	s.Store, s.Relay = s.Env.Store, s.Env.Relay

	// Listen first: the local fleet's workers need the URL.
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	s.URL = "http://" + ln.Addr().String()
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	// The scaler, the local fleet and wake-on-enqueue are wired before the
	// dispatch loop starts.
	if err := s.startFleet(runCtx, o); err != nil {
		cancel()
		s.Close()
		return nil, err
	}
	esm := &EventSourceMapping{
		Client: s.SQS, QueueURL: s.QueueURL, QueueARN: "arn:aws:sqs:us-east-1:000000000000:" + lastSegment(s.QueueURL), DLQURL: s.DLQURL,
		BatchSize: 10, Window: 200 * time.Millisecond, VisibilityTimeout: o.VisibilityTimeout, MaxReceives: o.MaxReceives,
		Handler: s.Dispatch.Handle, Logger: o.Logger, Invoked: s.signalDispatched,
	}
	s.Go(func() { esm.Run(runCtx) })
	if o.RelayInterval == 0 {
		o.RelayInterval = 500 * time.Millisecond
	}
	if o.RelayInterval > 0 {
		s.Go(func() { s.Relay.Run(runCtx, o.RelayInterval) })
	}
	registration, err := s.registration(o)
	if err != nil {
		s.Close()
		return nil, err
	}
	apiOpts := []apifn.APIOption{apifn.RegisterLimit(o.RegisterLimit), registration}
	if o.NoAnnounce {
		apiOpts = append(apiOpts, apifn.NoAnnounce())
	}
	apiHandler, err := apifn.NewAPI(s.Env, sqsqueue.Queue{Client: s.SQS, URL: s.QueueURL},
		consoleKeys, auth.TokenOrIAM{Token: auth.OperatorToken(o.OperatorToken)}, s.Assets, apiOpts...)
	if err != nil {
		s.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/local/events", s.operatorRoute(http.MethodPost, s.localEvents))
	mux.HandleFunc("/local/events/recent", s.operatorRoute(http.MethodGet, s.recentEvents))
	mux.Handle("/", apiHandler)
	s.API = apiHandler
	s.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.Go(func() {
		if err := s.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("API server stopped", "error", err.Error())
		}
	})
	return s, nil
}

// Dispatched answers a channel that receives each time dispatch has handled
// a batch of submissions (whatever came of it): the signal for code that
// waits on the jobs dispatch creates, such as a test. It holds one value,
// so batches handled while nobody reads it make one signal.
func (s *Stack) Dispatched() <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.dispatched = append(s.dispatched, ch)
	s.mu.Unlock()
	return ch
}

func (s *Stack) signalDispatched() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, ch := range s.dispatched {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Go runs f until the stack closes (Close waits for it).
func (s *Stack) Go(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

func (s *Stack) startBackends(ctx context.Context, o Options) error {
	ddbURL := endpoint(o.DynamoDBEndpoint, awsenv.EnvDynamoDBEndpoint)
	if ddbURL == "" {
		srv, err := localaws.StartDynamoDB("")
		if err != nil {
			return err
		}
		s.ddb, ddbURL = srv, srv.URL
	}
	sqsURL := endpoint(o.SQSEndpoint, awsenv.EnvSQSEndpoint)
	if sqsURL == "" {
		srv, err := localaws.SharedSQS("")
		if err != nil {
			return err
		}
		sqsURL = srv.URL
	}
	if o.Chaos > 0 {
		var err error
		if ddbURL, sqsURL, err = s.startChaos(o.Chaos, ddbURL, sqsURL); err != nil {
			return err
		}
	}
	s.DynamoDB = localaws.DynamoDBClient(ddbURL, o.DynamoDBOptions...)
	s3URL := endpoint(o.S3Endpoint, awsenv.EnvS3Endpoint)
	if s3URL == "" {
		srv, err := localaws.StartS3("")
		if err != nil {
			return err
		}
		s.s3srv, s3URL = srv, srv.URL
	}
	s.S3 = s3.NewFromConfig(localaws.Config(s3URL), func(o *s3.Options) { o.UsePathStyle = true })
	s.SQS = localaws.SQSClient(sqsURL, o.SQSOptions...)
	suffix := strings.ToLower(auth.RandomSecret(4))
	suffix = strings.NewReplacer("_", "x", "-", "y").Replace(suffix)
	s.Table = fleetconfig.TableName(o.Config.Stage) + "-" + suffix
	if err := store.CreateTable(ctx, s.DynamoDB, s.Table); err != nil {
		return err
	}
	base := "fleetq-" + o.Config.Stage + "-" + suffix
	s.Bucket = base + "-assets"
	if _, err := s.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)}); err != nil {
		return fmt.Errorf("create bucket %s: %w", s.Bucket, err)
	}
	s.Assets = &assets.S3{Presign: s3.NewPresignClient(s.S3), Bucket: s.Bucket, Clock: o.Clock}
	var err error
	if s.DLQURL, err = createQueue(ctx, s.SQS, base+"-submissions-dlq", 0); err != nil {
		return err
	}
	s.QueueURL, err = createQueue(ctx, s.SQS, base+"-submissions", o.VisibilityTimeout)
	return err
}

// endpoint is the endpoint given in the options, else the one its
// variable names, else "" (the stack serves its own).
func endpoint(given, envVar string) string {
	if given != "" {
		return given
	}
	return aws.ToString(awsenv.Endpoint(envVar))
}

func createQueue(ctx context.Context, c *sqs.Client, name string, visibility time.Duration) (string, error) {
	attrs := map[string]string{}
	if visibility > 0 {
		attrs["VisibilityTimeout"] = fmt.Sprint(int(visibility / time.Second))
	}
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

func lastSegment(u string) string { return u[strings.LastIndex(u, "/")+1:] }

// HandleEvents routes EventBridge events of a source and detail-type to h,
// for POST /local/events.
func (s *Stack) HandleEvents(source, detailType string, h EventHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[source+"|"+detailType] = h
}

// DeliverEvent runs the handler for an event as its EventBridge rule would.
func (s *Stack) DeliverEvent(ctx context.Context, ev events.CloudWatchEvent) (any, error) {
	s.mu.RLock()
	h, ok := s.handlers[ev.Source+"|"+ev.DetailType]
	s.mu.RUnlock()
	if !ok {
		return nil, &wire.Error{Status: http.StatusBadRequest, Code: wire.CodeInvalidArgument,
			Message: fmt.Sprintf("no rule routes source %q detail-type %q in this stack", ev.Source, ev.DetailType)}
	}
	return h(ctx, ev)
}

// operatorRoute serves a local route to the operator credential and one
// method, answering anything else in the API's error shape.
func (s *Stack) operatorRoute(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := auth.OperatorToken(s.OperatorToken).AuthenticateOperator(r); err != nil {
			wire.WriteError(w, &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: "this route needs the operator credential"})
			return
		}
		if r.Method != method {
			w.Header().Set("Allow", method)
			wire.WriteError(w, &wire.Error{Status: http.StatusMethodNotAllowed, Code: wire.CodeInvalidArgument, Message: "use " + method})
			return
		}
		h(w, r)
	}
}

// localEvents is POST /local/events: an EventBridge event in, its handler's summary out.
func (s *Stack) localEvents(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 256<<10))
	if err != nil {
		wire.WriteError(w, &wire.Error{Status: http.StatusRequestEntityTooLarge, Code: wire.CodeInvalidArgument, Message: "the body is larger than 256 KiB"})
		return
	}
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(data, &ev); err != nil || ev.Source == "" || ev.DetailType == "" {
		wire.WriteError(w, &wire.Error{Status: http.StatusBadRequest, Code: wire.CodeInvalidArgument, Message: "the body must be an EventBridge event with source and detail-type"})
		return
	}
	summary, err := s.DeliverEvent(r.Context(), ev)
	if err != nil {
		var ae *wire.Error
		if !errors.As(err, &ae) {
			s.log.Error("local event handler failed", "source", ev.Source, "detail_type", ev.DetailType, "error", err.Error())
			ae = &wire.Error{Status: http.StatusInternalServerError, Code: wire.CodeInternal, Message: "the handler failed; see the stack's log"}
		}
		wire.WriteError(w, ae)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(summary)
}

// recentEvents is GET /local/events/recent[?limit=N]: the newest job
// lifecycle events the stack published, oldest first.
func (s *Stack) recentEvents(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			wire.WriteError(w, &wire.Error{Status: http.StatusBadRequest, Code: wire.CodeInvalidArgument, Message: `query "limit": must be between 1 and 1000`})
			return
		}
		limit = n
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"events": s.Events.Recent(limit)})
}

// Close stops the API, the event source mapping and the embedded DynamoDB.
func (s *Stack) Close() error {
	if s.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.server.Shutdown(ctx)
		cancel()
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.Fleet != nil {
		s.Fleet.Close()
	}
	s.closeAgents()
	s.wg.Wait()
	var errs []error
	if s.s3srv != nil {
		errs = append(errs, s.s3srv.Close())
	}
	for _, p := range s.chaos {
		errs = append(errs, p.Close())
	}
	if s.ddb != nil {
		errs = append(errs, s.ddb.Close())
	}
	if s.STS != nil {
		errs = append(errs, s.STS.Close())
	}
	return errors.Join(errs...)
}

// startChaos puts a fault proxy at rate in front of DynamoDB and SQS and
// answers the proxies' URLs.
func (s *Stack) startChaos(rate float64, ddbURL, sqsURL string) (string, string, error) {
	if rate > 1 {
		return "", "", fmt.Errorf("chaos rate %g: must be between 0 and 1", rate)
	}
	s.chaos = map[string]*faultproxy.Proxy{}
	for _, svc := range []struct {
		name string
		url  *string
	}{{"dynamodb", &ddbURL}, {"sqs", &sqsURL}} {
		p, err := faultproxy.Start(*svc.url, faultproxy.Options{Rate: rate})
		if err != nil {
			return "", "", err
		}
		s.chaos[svc.name] = p
		*svc.url = p.URL
	}
	return ddbURL, sqsURL, nil
}

// ChaosFaults counts the faults injected so far by service ("dynamodb",
// "sqs") and kind; nil without Options.Chaos.
func (s *Stack) ChaosFaults() map[string]map[faultproxy.Kind]int {
	if s.chaos == nil {
		return nil
	}
	out := map[string]map[faultproxy.Kind]int{}
	for name, p := range s.chaos {
		out[name] = p.Counts()
	}
	return out
}
