package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/fleetq/fleetq/pkg/aws/assets"
	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/submission"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/service/console"
)

// WorkerStore is what the worker routes need of the store.
type WorkerStore interface {
	TakeRegistrationSlot(ctx context.Context, source string, limit int) (time.Duration, error)
	RegisterWorker(ctx context.Context, r worker.Registration) (worker.Worker, error)
	LeaseNext(ctx context.Context, a worker.Auth, workflows []string) (job.Job, error)
	Heartbeat(ctx context.Context, a worker.Auth, jobID, token string, progress *float64) (job.HeartbeatResult, error)
	Complete(ctx context.Context, a worker.Auth, jobID, token string, result json.RawMessage) error
	Fail(ctx context.Context, a worker.Auth, jobID, token string, e job.Error) (job.Outcome, error)
	Requeue(ctx context.Context, a worker.Auth, jobID, token string, reason job.PreemptReason) (job.Outcome, error)
	DeregisterWorker(ctx context.Context, a worker.Auth) error
	MarkWorkerUnhealthy(ctx context.Context, a worker.Auth) (worker.Worker, error)
	PutBootReport(ctx context.Context, r worker.BootReport) error
	Authorizer
}

// JobStore is what the producer routes need.
type JobStore interface {
	GetJob(ctx context.Context, id string) (job.Job, error)
	GetTenantJob(ctx context.Context, tenant, id string) (job.Job, error)
	ListTenantJobs(ctx context.Context, tenant string, fleets []string, status job.Status, limit int, cursor string) ([]job.Summary, string, error)
	Cancel(ctx context.Context, id string) (job.Status, error)
	AcceptJob(ctx context.Context, n job.Spec, fresh bool) (job.Job, bool, error)
	WithdrawJob(ctx context.Context, tenant, id string) error
	EstimateStore
}

// AdminStore is what the operator routes need.
type AdminStore interface {
	CountBacklog(ctx context.Context, fleet string) (fleetstate.Backlog, error)
	GetFleetState(ctx context.Context, fleet string) (fleetstate.State, error)
	ListWorkers(ctx context.Context, fleet string) ([]worker.Worker, error)
	GetWorker(ctx context.Context, id string) (worker.Worker, error)
	SetWorkerApproved(ctx context.Context, id string, approved bool) (worker.Worker, error)
	RevokeWorker(ctx context.Context, id string) (worker.Worker, error)
	DrainWorker(ctx context.Context, id string) (worker.Worker, error)
	RotateWorkerToken(ctx context.Context, id, tokenHash string) (worker.Worker, error)
	ListJobs(ctx context.Context, fleet string, status job.Status, limit int) ([]job.Summary, error)
	RetryDead(ctx context.Context, id string) (job.Job, error)
	ListRejections(ctx context.Context, limit int) ([]submission.Rejection, error)
	CostsSince(ctx context.Context, since time.Time) ([]cost.Group, error)
	BootReports(ctx context.Context, fleet string) ([]worker.BootReport, error)
}

// Store is everything the API needs of the store; *store.Store satisfies it.
type Store interface {
	WorkerStore
	JobStore
	AdminStore
	console.Sessions
	KeyStore
	PrincipalStore
}

// Enqueuer puts a submission on the submission queue.
type Enqueuer interface {
	Enqueue(ctx context.Context, body []byte) error
}

// Attestor checks an attested registration's signed identity request and
// answers the instance and fleet it proves (*attest.Verifier).
type Attestor interface {
	Verify(ctx context.Context, id *wire.AWSIdentity) (attest.Identity, error)
}

// FleetSecrets supplies the secrets a fleet accepts for registration by
// secret: the current one first, and the previous one during a rotation;
// none when the fleet takes no secret.
type FleetSecrets interface {
	FleetSecrets(ctx context.Context, fleet string) ([]string, error)
}

// OperatorAuthenticator says who the operator behind a request is.
type OperatorAuthenticator interface {
	AuthenticateOperator(r *http.Request) (string, error)
}

// Assets presigns a leased job's inputs and outputs, and producers' uploads
// (nil: the stage has no asset bucket).
type Assets interface {
	LeaseURLs(ctx context.Context, j job.Job) (assets.URLs, error)
	NewUpload(ctx context.Context, tenant, filename, contentType string) (assets.Upload, error)
	LogURLs(ctx context.Context, j job.Job) ([]assets.LogURL, error)
}

// Announcer publishes a job's pending lifecycle events right after the
// transition that created them. It is best effort: what it misses, the
// outbox relay sends later.
type Announcer interface {
	Announce(ctx context.Context, jobID string)
}

// Config holds the API's optional settings; the zero Config is the
// defaults.
type Config struct {
	// Attestor admits attested registrations (default nil: none, every
	// fleet registers by secret); FleetSecrets admits registrations by a
	// fleet's secret (default nil: none).
	Attestor     Attestor
	FleetSecrets FleetSecrets
	// Assets presigns jobs' input, output and log URLs and producers'
	// uploads (default nil: the stage has no asset bucket).
	Assets Assets
	// Events announces job outcomes at once (default nil: only the relay
	// does).
	Events Announcer
	// RegisterLimit is registrations per minute per source address
	// (default: the config's registration_limit).
	RegisterLimit int
	// WaitConcurrency is the most waits (GET /api/jobs/{job_id}/wait) one
	// process holds at once; past it a wait is answered 429 at once
	// (default: the config's wait_concurrency). In AWS a function's
	// process serves one request at a time and the wait function's
	// reserved concurrency is the cap; the dev stack serves every route
	// from one process, and this keeps its waits to the same number.
	WaitConcurrency int
	// NewJobID names jobs submitted without a job_id (default: a random
	// UUID).
	NewJobID func() string
}

// server is the API: what New was given, the Config's settings with their
// defaults filled in.
type server struct {
	Config        *fleetconfig.Config
	Store         Store
	Queue         Enqueuer
	Operator      OperatorAuthenticator
	Clock         clock.Clock
	Attestor      Attestor
	FleetSecrets  FleetSecrets
	Assets        Assets
	Events        Announcer
	RegisterLimit int
	NewJobID      func() string
	// waits holds a token for each wait in progress (WaitConcurrency).
	waits     chan struct{}
	log       *slog.Logger
	console   *console.Console
	checked   *checkedTokens
	estimates *estimates
}

func (s *server) announce(ctx context.Context, jobID string) {
	if s.Events != nil {
		s.Events.Announce(ctx, jobID)
	}
}

// New returns the API handler. cfg is the stage's fleet config, st the
// store, queue takes submissions, consoleKeys sign operator console logins
// and sessions (the console's own key, never a fleet's secret), and
// operator says who the operator behind a request is.
func New(cfg *fleetconfig.Config, st Store, queue Enqueuer, consoleKeys console.Keys, operator OperatorAuthenticator,
	clk clock.Clock, log *slog.Logger, c Config) (http.Handler, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("api.New: no fleet config")
	case st == nil:
		return nil, errors.New("api.New: no store")
	case queue == nil:
		return nil, errors.New("api.New: no submission queue")
	case operator == nil:
		return nil, errors.New("api.New: no operator authenticator")
	case clk == nil:
		return nil, errors.New("api.New: no clock")
	case log == nil:
		return nil, errors.New("api.New: no logger")
	case c.RegisterLimit < 0:
		return nil, fmt.Errorf("api.New: registration limit %d is negative", c.RegisterLimit)
	case c.WaitConcurrency < 0:
		return nil, fmt.Errorf("api.New: wait concurrency %d is negative", c.WaitConcurrency)
	}
	if c.RegisterLimit == 0 {
		c.RegisterLimit = cfg.RegistrationLimit
	}
	if c.WaitConcurrency == 0 {
		c.WaitConcurrency = max(1, cfg.WaitConcurrency)
	}
	if c.NewJobID == nil {
		c.NewJobID = uuid.NewString
	}
	s := &server{Config: cfg, Store: st, Queue: queue, Operator: operator, Clock: clk, Attestor: c.Attestor,
		FleetSecrets: c.FleetSecrets, Assets: c.Assets, Events: c.Events, RegisterLimit: c.RegisterLimit,
		NewJobID: c.NewJobID, waits: make(chan struct{}, c.WaitConcurrency), log: log, checked: newCheckedTokens(clk), estimates: newEstimates(st, clk)}
	con, err := console.New(consoleOps{s}, consoleKeys, st, clk, log, console.Config{})
	if err != nil {
		return nil, fmt.Errorf("api.New: %w", err)
	}
	s.console = con
	mux := http.NewServeMux()
	byPattern := map[string]map[string]http.HandlerFunc{}
	for _, rt := range routes {
		if byPattern[rt.Pattern] == nil {
			byPattern[rt.Pattern] = map[string]http.HandlerFunc{}
		}
		byPattern[rt.Pattern][rt.Method] = s.bind(rt.Auth, rt.handle)
	}
	for pattern, handlers := range byPattern {
		mux.Handle(pattern, methods(handlers))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, notFound("no route %s %s", r.Method, r.URL.Path))
	})
	return s.recoverer(s.logged(mux)), nil
}

// methods answers 405 with the error body for a known path and
// an unknown method.
func methods(handlers map[string]http.HandlerFunc) http.Handler {
	allowed := make([]string, 0, len(handlers))
	for m := range handlers {
		allowed = append(allowed, m)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := handlers[r.Method]; ok {
			h(w, r)
			return
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		wire.WriteError(w, &wire.Error{Status: http.StatusMethodNotAllowed, Code: wire.CodeInvalidArgument,
			Message: "method " + r.Method + " is not allowed here; use " + strings.Join(allowed, " or ")})
	})
}

// errBodyTooLarge answers a body over submission.MaxBodyBytes.
var errBodyTooLarge = &wire.Error{Status: http.StatusRequestEntityTooLarge, Code: wire.CodeInvalidArgument, Message: "the body is larger than 256 KiB"}

// readBody reads at most 256 KiB and decodes it strictly. A body declared
// larger is refused before any of it is read; one that turns out larger
// than declared (or sent without a length) is cut off at the limit.
func readBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	if r.ContentLength > submission.MaxBodyBytes {
		return errBodyTooLarge
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, submission.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errBodyTooLarge
		}
		return invalid("could not read the body: %v", err)
	}
	if len(data) > 0 {
		if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
			return err
		}
	}
	return decode(data, v, allowEmpty)
}

// checkContentType refuses a body declared as something other than JSON in
// UTF-8 (a form post from `curl -d`, text/plain, another charset), so a
// body is never read as JSON against its sender's declaration. A body
// without a Content-Type is read as JSON.
func checkContentType(ct string) error {
	if ct == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return invalid("Content-Type %q is malformed; send application/json", ct)
	}
	if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return invalid("Content-Type %q is not JSON; send the body as application/json", mt)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return invalid("charset %q is not supported; send the body as UTF-8", cs)
	}
	return nil
}

// sourceAddress is the caller's address without its port. Behind API
// Gateway the proxy adapter puts the client's source IP in RemoteAddr.
func sourceAddress(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		s.log.DebugContext(r.Context(), "request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "ms", time.Since(start).Milliseconds())
	})
}

func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "handler panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				s.writeError(w, r, errors.New("panic"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// rfc3339 formats a time as the API's RFC 3339 UTC string, or nil for zero.
func rfc3339(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format("2006-01-02T15:04:05.000Z")
	return &s
}
