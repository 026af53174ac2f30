// Package scalerfn builds the scaler function: the once-a-minute tick over
// every fleet (functions/scaler), and the constructors the dev stack ticks
// the same scaler with.
package scalerfn

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/spotprice"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/spotpools"
	"github.com/fleetq/fleetq/pkg/service/webhook"
)

// Function is the scaler function, for system.StartLambda.
var Function = system.Function{Name: awsenv.Scaler, Handler: func(l *system.Lambda, metrics io.Writer) (any, error) { return Handler(l, metrics) }}

// Handler returns the scaler function's handler: one tick per
// scheduled event over the groups of FLEETQ_FLEET_GROUPS (and, for the
// fleets with a spot_pool, their pools through EC2), with the metric
// lines written to metrics (stdout, which CloudWatch Logs turns into
// metrics), reading each fleet's Spot prices through EC2 about once an hour.
func Handler(e *system.Lambda, metrics io.Writer) (func(context.Context, events.CloudWatchEvent) (TickSummary, error), error) {
	groups, err := e.FleetGroups()
	if err != nil {
		return nil, err
	}
	if err := e.Subnets(&groups); err != nil {
		return nil, err
	}
	if len(e.Config.Webhooks.AllowedHosts) > 0 {
		// The scaler's tick drains the relay, which delivers the callbacks.
		keys, err := webhookKeys(e)
		if err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		if err := system.EnableWebhooks(e.Env, keys, webhook.Guard{}); err != nil {
			return nil, err
		}
	}
	client := spotpools.EC2(e)
	// The fleets' Spot pools run through EC2 beside their groups.
	sc, err := NewScaler(e.Env, spotpools.Capacity(groups, client, e.Config), metrics, spotprice.Reader{EC2: client})
	if err != nil {
		return nil, err
	}
	return ScheduleHandler(sc), nil
}

// webhookKeys are the keys job callbacks are signed with: the Secrets
// Manager secret FLEETQ_WEBHOOK_KEY_ARN (the stack generates it).
func webhookKeys(e *system.Lambda) (webhook.Keys, error) {
	arn, err := e.Require(awsenv.EnvWebhookKeyARN)
	if err != nil {
		return nil, fmt.Errorf("%w: the scaler cannot sign job callbacks", err)
	}
	return &auth.SecretsManagerKeys{Client: e.SecretsManager(), ID: arn, Window: system.KeyRotationWindow}, nil
}

// NewScaler returns the tick over every fleet. capacity is the fleets'
// groups (nil: the scaler keeps the books and its decisions are advisory);
// metrics receives one Embedded Metric Format line per fleet per tick;
// spotPrices, when set, is where it reads each fleet's Spot prices about
// once an hour and keeps them in the store, where the relay prices Spot
// jobs by their instance's type and zone.
func NewScaler(e *system.Env, capacity scaler.Capacity, metrics io.Writer, spotPrices scaler.SpotPriceSource) (*scaler.Scaler, error) {
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
			out.Fleets = append(out.Fleets, FleetTick{Fleet: r.Fleet, Desired: r.Desired, Reason: r.Reason.String(),
				Terminated: r.Terminated, Requeued: r.Swept.Leases.Requeued, Dead: r.Swept.Leases.Dead})
		}
		return out, err
	}
}
