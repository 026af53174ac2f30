package system

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/service/api"
	"github.com/fleetq/fleetq/pkg/service/console"
	"github.com/fleetq/fleetq/pkg/service/dispatch"
	"github.com/fleetq/fleetq/pkg/service/interruption"
	"github.com/fleetq/fleetq/pkg/service/jobevents"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/webhook"
)

// Env is what every function shares: the stage's fleet config, the job
// store on its table, the clock, the logger, and the relay that publishes
// job lifecycle events from the store's outbox.
type Env struct {
	Config *fleetconfig.Config
	Store  *store.Store
	Clock  clock.Clock
	Logger *slog.Logger
	// Relay publishes job events (to EventBridge in AWS, to the in-process
	// bus in the dev stack); nil when the stage publishes none and the
	// events stay in the outbox.
	Relay *jobevents.Relay
	// events is where Relay publishes.
	events store.Publisher
}

// StoreOption tunes the Env's store beyond its table, config, clock and
// logger.
type StoreOption func(*store.Options)

// CostMetrics sends a CostUSD metric line per priced job (dimensions Stage
// and Tenant) to w: os.Stdout in Lambda, where CloudWatch Logs turns the
// lines into metrics.
func CostMetrics(w io.Writer) StoreOption { return func(o *store.Options) { o.CostMetrics = w } }

// New builds the Env on a DynamoDB client and table. events receives the
// job lifecycle events; nil publishes none.
func New(cfg *fleetconfig.Config, db *dynamodb.Client, table string, clk clock.Clock, log *slog.Logger, events store.Publisher, opts ...StoreOption) (*Env, error) {
	o := store.Options{Table: table, Config: cfg, Clock: clk, Logger: log}
	for _, opt := range opts {
		opt(&o)
	}
	st := store.New(db, o)
	e := &Env{Config: cfg, Store: st, Clock: clk, Logger: log, events: events}
	if events != nil {
		r, err := newRelay(e, jobevents.Config{})
		if err != nil {
			return nil, err
		}
		e.Relay = r
	}
	return e, nil
}

// newRelay is the relay of e's outbox to e's publisher. Its Run (the dev
// stack's relay; in AWS the scaler's tick drains) is paced by wall time, so
// that events flow in a dev stack on a fake clock too.
func newRelay(e *Env, c jobevents.Config) (*jobevents.Relay, error) {
	return jobevents.NewRelay(e.Store, e.events, clock.Real{}, e.Logger, c)
}

// EnableWebhooks makes the relay deliver jobs' outcomes to their callback
// URLs, signed with the webhook key (keys' current one), through guard
// (Guard{} in AWS: public addresses only; the dev stack admits loopback,
// where its receivers run): it replaces e.Relay with one that delivers, so
// it comes before anything is built on the relay. A stage without
// webhooks.allowed_hosts accepts no callback URL and gets no deliverer.
// Webhooks ride the relay: a stage without one cannot deliver them.
func EnableWebhooks(e *Env, keys webhook.Keys, guard webhook.Guard) error {
	if len(e.Config.Webhooks.AllowedHosts) == 0 {
		return nil
	}
	if e.Relay == nil {
		return fmt.Errorf("webhooks.allowed_hosts is set but the stage relays no job events: callbacks ride the relay")
	}
	d, err := webhook.NewDeliverer(e.Config.Webhooks, e.Store, keys, guard, e.Clock, e.Logger)
	if err != nil {
		return err
	}
	r, err := newRelay(e, jobevents.Config{Callbacks: d})
	if err != nil {
		return err
	}
	e.Relay = r
	return nil
}

// APIOption tunes the API beyond its required dependencies.
type APIOption func(*api.Config)

// RegisterLimit sets registrations per minute per source address (default:
// the config's registration_limit).
func RegisterLimit(n int) APIOption { return func(o *api.Config) { o.RegisterLimit = n } }

// NoAnnounce leaves a job's events to the relay instead of publishing them
// right after the transition (benchmarks count the lifecycle's requests
// apart from the announcement's).
func NoAnnounce() APIOption { return func(o *api.Config) { o.Events = nil } }

// Registration sets how workers prove they belong to a fleet: attested
// (nil: no attested registration) and by the fleets' own secrets (nil: no
// fleet takes a secret).
func Registration(attested api.Attestor, secrets api.FleetSecrets) APIOption {
	return func(o *api.Config) { o.Attestor, o.FleetSecrets = attested, secrets }
}

// NewAttestor returns the verifier of attested registrations: identity
// requests are forwarded to the STS endpoint only, and a fleet's workers
// must be its role (roles, by slug) on an instance of its groups (groups,
// by slug). The server id is the stage. A fleet without a role is not
// attested.
func NewAttestor(e *Env, stsEndpoint string, instances attest.Instances, roles map[string]string, groups map[string][]string) (*attest.Verifier, error) {
	fleets := map[string]attest.Fleet{}
	for _, f := range e.Config.Fleets {
		if roles[f.Slug] == "" {
			continue
		}
		fleets[f.Slug] = attest.Fleet{RoleARN: roles[f.Slug], Groups: groups[f.Slug]}
	}
	return attest.NewVerifier(stsEndpoint, instances, attest.Config{ServerID: e.Config.Stage, Fleets: fleets, Clock: e.Clock})
}

// NewAPI returns the worker, producer and operator HTTP API. queue takes
// submissions, consoleKeys sign operator console sessions, operator authenticates
// operators, files presigns job input and output URLs (nil: a stage without
// a bucket).
func NewAPI(e *Env, queue api.Enqueuer, consoleKeys console.Keys, operator api.OperatorAuthenticator, files api.Assets, opts ...APIOption) (http.Handler, error) {
	c := api.Config{Assets: files}
	if e.Relay != nil {
		c.Events = e.Relay
	}
	for _, opt := range opts {
		opt(&c)
	}
	return api.New(e.Config, e.Store, queue, consoleKeys, operator, e.Clock, e.Logger, c)
}

// NewDispatch returns the handler turning submission batches into jobs.
// capacity is the fleets' groups, raised at once when work arrives for a
// fleet at zero; nil leaves the raise to the scaler's next tick (a stack
// without groups).
func NewDispatch(e *Env, capacity scaler.Capacity) (*dispatch.Handler, error) {
	var c dispatch.Config
	if capacity != nil {
		w, err := scaler.NewWaker(e.Config, e.Store, capacity, e.Logger)
		if err != nil {
			return nil, err
		}
		c.Waker = w
	}
	return dispatch.New(e.Config, e.Store, e.Logger, c)
}

// NewScaler returns the tick over every fleet. capacity is the fleets'
// groups (nil: the scaler keeps the books and its decisions are advisory);
// metrics receives one Embedded Metric Format line per fleet per tick;
// spotPrices, when set, is where it reads each fleet's Spot prices about
// once an hour and keeps them in the store, where the relay prices Spot
// jobs by their instance's type and zone.
func NewScaler(e *Env, capacity scaler.Capacity, metrics io.Writer, spotPrices scaler.SpotPriceSource) (*scaler.Scaler, error) {
	c := scaler.Config{Capacity: capacity, Stage: e.Config.Stage, Metrics: metrics, Interruptions: e.Store.SpotInterruptions,
		InterruptionCounts: e.Store.InterruptionCounts}
	if e.Relay != nil {
		c.Relay = e.Relay
	}
	if spotPrices != nil {
		p, err := scaler.NewSpotPricer(spotPrices, e.Store, scaler.SpotPricerConfig{})
		if err != nil {
			return nil, err
		}
		c.SpotPrices = p
	}
	return scaler.New(e.Config, e.Store, e.Clock, e.Logger, c)
}

// NewInterruption returns the handler of the EC2 and Auto Scaling events
// that end or threaten instances. lifecycle completes terminate lifecycle
// actions.
func NewInterruption(e *Env, lifecycle interruption.Lifecycle) (*interruption.Handler, error) {
	return interruption.New(e.Store, lifecycle, e.Clock, e.Logger, interruption.Config{})
}

// FleetTick is one fleet's line of a tick summary.
type FleetTick struct {
	Fleet      string   `json:"fleet_slug"`
	Desired    int      `json:"desired"`
	Reason     string   `json:"reason"`
	Terminated []string `json:"terminated,omitempty"`
	Requeued   int      `json:"swept_requeued"`
	Dead       int      `json:"swept_dead"`
}

// TickSummary is what the scheduled tick answers.
type TickSummary struct {
	Fleets []FleetTick `json:"fleets"`
}

// ScheduleHandler runs one tick of sc per scheduled event and answers what
// it did for each fleet: the scaler Lambda's handler and the dev stack's
// answer to a posted schedule event.
func ScheduleHandler(sc *scaler.Scaler) func(context.Context, events.CloudWatchEvent) (TickSummary, error) {
	return func(ctx context.Context, _ events.CloudWatchEvent) (TickSummary, error) {
		reports, err := sc.Tick(ctx)
		out := TickSummary{Fleets: make([]FleetTick, 0, len(reports))}
		for _, r := range reports {
			out.Fleets = append(out.Fleets, FleetTick{Fleet: r.Fleet, Desired: r.Desired, Reason: r.Reason,
				Terminated: r.Terminated, Requeued: r.Swept.Requeued, Dead: r.Swept.Dead})
		}
		return out, err
	}
}
