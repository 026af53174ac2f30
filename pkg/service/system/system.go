package system

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/jobevent"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/service/jobevents"
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
	events jobevent.Publisher
}

// StoreOption tunes the Env's store beyond its table, config, clock and
// logger.
type StoreOption func(*store.Options)

// CostMetrics sends a CostUSD metric line per priced job (dimensions Stage
// and Tenant) to w: os.Stdout in Lambda, where CloudWatch Logs turns the
// lines into metrics.
func CostMetrics(w io.Writer) StoreOption { return func(o *store.Options) { o.CostMetrics = w } }

// LeaseSpread sets the narrowest lease window: how many of the oldest
// top-priority jobs a poll picks its claim from at random (the store's
// default is 8). With 1, jobs are leased in priority-then-age order until
// pollers collide, as tests that follow given jobs through their leases
// need.
func LeaseSpread(n int) StoreOption { return func(o *store.Options) { o.LeaseSpread = n } }

// New builds the Env on a DynamoDB client and table. events receives the
// job lifecycle events; nil publishes none.
func New(cfg *fleetconfig.Config, db *dynamodb.Client, table string, clk clock.Clock, log *slog.Logger, events jobevent.Publisher, opts ...StoreOption) (*Env, error) {
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
