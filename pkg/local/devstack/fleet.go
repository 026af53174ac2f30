package devstack

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localfleet"
	"github.com/fleetq/fleetq/pkg/service/agent"
	"github.com/fleetq/fleetq/pkg/service/interruption"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/system/dispatchfn"
	"github.com/fleetq/fleetq/pkg/service/system/interruptionfn"
	"github.com/fleetq/fleetq/pkg/service/system/scalerfn"
)

// FleetOptions configure the dev stack's scaler and local fleet.
type FleetOptions struct {
	// Tick is how often the scaler runs (default 60s, as the EventBridge
	// schedule in AWS; negative: only on a Scheduled Event posted to
	// /local/events).
	Tick time.Duration
	// NoLocalFleet runs no local fleet: workers are started by hand, and the
	// scaler only keeps the books (its decisions are advisory) unless
	// Capacity is set.
	NoLocalFleet bool
	// Capacity, with NoLocalFleet, is what the scaler and wake-on-enqueue
	// scale instead of nothing, and Lifecycle what completes terminate
	// lifecycle actions: the soak passes Auto Scaling groups on the fake
	// Auto Scaling API behind a fault proxy (scaler.Groups and the
	// pkg/aws/asg adapter, as the Lambda functions build them).
	Capacity  scaler.Capacity
	Lifecycle interruption.Lifecycle
	// BootDelay is how long a local instance takes to start its worker
	// (default 20s).
	BootDelay time.Duration
	// PoolStart is the fraction of BootDelay an instance of a fleet's
	// bridge pool takes to start (default 0.25).
	PoolStart float64
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
	// AgentConfig, with LocalAgents, adjusts the config of the agent of
	// each booted local instance before it starts (e.g. one instance gets
	// its own nvidia-smi, to make its GPU turn sick).
	AgentConfig func(fleet, instanceID string, c *agent.Config)
	// Seed makes the random interruptions repeatable.
	Seed uint64
	// Metrics receives the scaler's Embedded Metric Format lines (nil:
	// none), as stdout does in Lambda.
	Metrics io.Writer
}

// Scheduled Event of the scaler's EventBridge rule.
const (
	scheduleSource     = "aws.events"
	scheduleDetailType = "Scheduled Event"
)

// startFleet wires the interruption handler (EC2 and Auto Scaling events
// posted to /local/events), wake-on-enqueue, the scaler (its loop and its
// schedule event) and the local fleet.
func (s *Stack) startFleet(ctx context.Context, o Options) error {
	fo := o.Fleet
	if fo.Tick == 0 {
		fo.Tick = time.Minute
	}
	if fo.BootDelay <= 0 {
		fo.BootDelay = 20 * time.Second
	}
	if fo.Launch == nil && fo.LocalAgents {
		fo.Launch = s.launchAgent
		s.agents.configure = fo.AgentConfig
	}
	// Without a local fleet there are no groups: dispatch wakes nothing,
	// the scaler keeps the books, and lifecycle actions have no group to
	// complete.
	var capacity scaler.Capacity
	var lifecycle interruption.Lifecycle = interruption.NoAutoScaling
	if !fo.NoLocalFleet {
		max, onDemand, pool := map[string]int{}, map[string]bool{}, map[string]int{}
		for _, f := range o.Config.Fleets {
			max[f.Slug] = f.MaxInstances
			// A fleet with an On-Demand rung gets its On-Demand group, as
			// the CDK app builds one beside the Spot group; a fleet with a
			// bridge gets one with a warm pool of stopped instances.
			onDemand[f.Slug] = f.OnDemand.Enabled()
			pool[f.Slug] = f.Bridge.Pool
		}
		s.Fleet = localfleet.New(ctx, localfleet.Options{
			Clock: o.Clock, BootDelay: fo.BootDelay, Launch: fo.Launch, MaxInstances: max, OnDemand: onDemand,
			Pool: pool, PoolStart: fo.PoolStart,
			SpotRate: fo.SpotRate, Notice: fo.SpotNotice, Seed: fo.Seed, Interrupt: s.interruptLocal,
		})
		capacity, lifecycle = s.Fleet, s.Fleet
		s.Go(func() { s.Fleet.Run(ctx, time.Second) })
	} else if fo.Capacity != nil {
		capacity = fo.Capacity
		if fo.Lifecycle != nil {
			lifecycle = fo.Lifecycle
		}
	}
	var err error
	if s.Dispatch, err = dispatchfn.NewDispatch(s.Env, capacity); err != nil {
		return err
	}
	if s.Scaler, err = scalerfn.NewScaler(s.Env, capacity, fo.Metrics, nil); err != nil {
		return err
	}
	if s.Interruptions, err = interruptionfn.NewInterruption(s.Env, lifecycle); err != nil {
		return err
	}
	// The events the stage's rules route to the interruption function.
	for _, r := range interruption.HandledEvents() {
		s.HandleEvents(r.Source, r.DetailType, func(ctx context.Context, ev events.CloudWatchEvent) (any, error) {
			return s.Interruptions.Handle(ctx, ev)
		})
	}
	tick := scalerfn.ScheduleHandler(s.Scaler)
	s.HandleEvents(scheduleSource, scheduleDetailType, func(ctx context.Context, ev events.CloudWatchEvent) (any, error) {
		return tick(ctx, ev)
	})
	if fo.Tick > 0 {
		s.Go(func() {
			clock.Every(ctx, clock.Real{}, fo.Tick, func() {
				if _, err := s.Scaler.Tick(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("scaler tick", "error", err.Error())
				}
				// The interruption function's own schedule: held terminations.
				if _, err := s.Interruptions.Sweep(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("termination sweep", "error", err.Error())
				}
			})
		})
	}
	return nil
}

// interruptLocal delivers a Spot interruption warning for a local instance
// to whatever handles the EC2 event in this stack, as EventBridge would.
func (s *Stack) interruptLocal(ctx context.Context, fleet, instanceID string) error {
	now := s.Env.Clock.Now()
	ev := events.CloudWatchEvent{
		ID: fmt.Sprintf("local-spot-%s-%d", instanceID, now.UnixNano()), Source: "aws.ec2",
		DetailType: interruption.SpotWarning, Time: now,
		Detail: []byte(`{"instance-id":"` + instanceID + `","instance-action":"terminate"}`),
	}
	_, err := s.DeliverEvent(ctx, ev)
	return err
}
