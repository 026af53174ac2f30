package devstack

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/clock"
	"github.com/fleetq/fleetq/pkg/interruption"
	"github.com/fleetq/fleetq/pkg/localfleet"
	"github.com/fleetq/fleetq/pkg/scaler"
)

// FleetOptions configure the dev stack's scaler and local fleet.
type FleetOptions struct {
	// Tick is how often the scaler runs (default 60s, as the EventBridge
	// schedule in AWS; negative: only on a Scheduled Event posted to
	// /local/events).
	Tick time.Duration
	// NoLocalFleet runs no local fleet: workers are started by hand, and the
	// scaler only keeps the books (its decisions are advisory).
	NoLocalFleet bool
	// BootDelay is how long a local instance takes to start its worker
	// (default 20s).
	BootDelay time.Duration
	// SpotRate interrupts local instances at random, per instance-hour,
	// through the interruption handler's path (a Spot warning event).
	SpotRate float64
	// SpotNotice is the time from a warning to the instance's end (default 2m).
	SpotNotice time.Duration
	// LocalAgents runs the worker agent (sleep runner) in process on every
	// booted local instance. Without it, and without Launch, instances boot
	// but never register (tests that drive workers themselves).
	LocalAgents bool
	// Launch overrides what runs on a booted local instance.
	Launch localfleet.Launch
	// Seed makes the random interruptions repeatable.
	Seed uint64
}

// Scheduled Event of the scaler's EventBridge rule.
const (
	scheduleSource     = "aws.events"
	scheduleDetailType = "Scheduled Event"
)

// startFleet wires the interruption handler (EC2 and Auto Scaling events
// posted to /local/events), wake-on-enqueue, the scaler (its loop and its
// schedule event) and the local fleet.
func (s *Stack) startFleet(ctx context.Context, o Options) {
	fo := o.Fleet
	if fo.Tick == 0 {
		fo.Tick = time.Minute
	}
	if fo.BootDelay <= 0 {
		fo.BootDelay = 20 * time.Second
	}
	s.Interruptions = &interruption.Handler{Store: s.Store, Logger: o.Logger}
	for _, r := range []struct{ source, detailType string }{
		{"aws.ec2", interruption.SpotWarning}, {"aws.ec2", interruption.Rebalance},
		{"aws.ec2", interruption.StateChange}, {"aws.autoscaling", interruption.TerminateHook},
	} {
		s.HandleEvents(r.source, r.detailType, func(ctx context.Context, ev events.CloudWatchEvent) (any, error) {
			return s.Interruptions.Handle(ctx, ev)
		})
	}
	s.Scaler = &scaler.Scaler{Store: s.Store, Clock: o.Clock, Logger: o.Logger, Stage: o.Config.Stage, Relay: s.Relay,
		Interruptions: s.Store.SpotInterruptions}
	if fo.Launch == nil && fo.LocalAgents {
		fo.Launch = s.launchAgent
	}
	if !fo.NoLocalFleet {
		max := map[string]int{}
		for _, f := range o.Config.Fleets {
			max[f.Slug] = f.MaxInstances
		}
		s.Fleet = localfleet.New(ctx, localfleet.Options{
			Clock: o.Clock, BootDelay: fo.BootDelay, Launch: fo.Launch, MaxInstances: max,
			SpotRate: fo.SpotRate, Notice: fo.SpotNotice, Seed: fo.Seed, Interrupt: s.interruptLocal,
		})
		s.Scaler.Capacity = s.Fleet
		s.Dispatch.Waker = &scaler.Waker{Store: s.Store, Capacity: s.Fleet, Logger: o.Logger}
		s.Go(func() { s.Fleet.Run(ctx, time.Second) })
	}
	s.HandleEvents(scheduleSource, scheduleDetailType, func(ctx context.Context, _ events.CloudWatchEvent) (any, error) {
		reports, err := s.Scaler.Tick(ctx)
		if err != nil {
			return nil, err
		}
		return tickSummary(reports), nil
	})
	if fo.Tick > 0 {
		s.Go(func() {
			clock.Every(ctx, o.Clock, fo.Tick, func() {
				if _, err := s.Scaler.Tick(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("scaler tick", "error", err.Error())
				}
			})
		})
	}
}

// interruptLocal delivers a Spot interruption warning for a local instance
// to whatever handles the EC2 event in this stack, as EventBridge would.
func (s *Stack) interruptLocal(ctx context.Context, fleet, instanceID string) error {
	ev := events.CloudWatchEvent{
		ID: fmt.Sprintf("local-spot-%s-%d", instanceID, time.Now().UnixNano()), Source: "aws.ec2",
		DetailType: interruption.SpotWarning, Time: time.Now().UTC(),
		Detail: []byte(`{"instance-id":"` + instanceID + `","instance-action":"terminate"}`),
	}
	_, err := s.DeliverEvent(ctx, ev)
	return err
}

type fleetTick struct {
	Fleet      string   `json:"fleet_slug"`
	Desired    int      `json:"desired"`
	Reason     string   `json:"reason"`
	Terminated []string `json:"terminated,omitempty"`
	Requeued   int      `json:"swept_requeued"`
	Dead       int      `json:"swept_dead"`
}

func tickSummary(reports []scaler.FleetReport) map[string]any {
	out := make([]fleetTick, 0, len(reports))
	for _, r := range reports {
		out = append(out, fleetTick{Fleet: r.Fleet, Desired: r.Desired, Reason: r.Decision.Reason,
			Terminated: r.Terminated, Requeued: r.Swept.Requeued, Dead: r.Swept.Dead})
	}
	return map[string]any{"fleets": out}
}
