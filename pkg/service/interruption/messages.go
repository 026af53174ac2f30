package interruption

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// Detail types handled, with the source that sends each.
const (
	SpotWarning   = "EC2 Spot Instance Interruption Warning"  // aws.ec2
	Rebalance     = "EC2 Instance Rebalance Recommendation"   // aws.ec2
	StateChange   = "EC2 Instance State-change Notification"  // aws.ec2
	TerminateHook = "EC2 Instance-terminate Lifecycle Action" // aws.autoscaling
)

// Event sources.
const (
	SourceEC2         = "aws.ec2"
	SourceAutoScaling = "aws.autoscaling"
	// SourceSchedule sends the schedule's tick, ScheduledEvent.
	SourceSchedule = "aws.events"
)

// ScheduledEvent is the detail type of an EventBridge schedule's tick: the
// handler sweeps its held terminations on it.
const ScheduledEvent = "Scheduled Event"

// ErrUnsupported is an event this handler has no rule for: a detail type it
// does not handle, or one that comes from another source than the service
// that sends it.
var ErrUnsupported = errors.New("unsupported event")

// ErrMalformed is an event of a handled detail type whose detail cannot be
// read or lacks a field the handler needs.
var ErrMalformed = errors.New("malformed event detail")

// Kind is what an event means for its instance; the handler picks its action
// by it.
type Kind string

// Kinds of message.
const (
	// KindSpotWarning: EC2 reclaims the Spot Instance in two minutes.
	KindSpotWarning Kind = "spot_warning"
	// KindRebalance: the Spot Instance is at elevated risk of interruption.
	KindRebalance Kind = "rebalance"
	// KindInstanceEnding: the instance is shutting down or terminated.
	KindInstanceEnding Kind = "instance_ending"
	// KindInstanceState: any other state change (pending, running,
	// stopping, stopped), which needs nothing.
	KindInstanceState Kind = "instance_state"
	// KindTerminateAction: the Auto Scaling group holds the instance in
	// Terminating:Wait until its lifecycle action is completed.
	KindTerminateAction Kind = "terminate_lifecycle_action"
)

// Message is one event's detail, parsed: it says what it means and which
// instance it is about.
type Message interface {
	Kind() Kind
	// InstanceID is the EC2 instance the event is about.
	InstanceID() string
}

// SpotInterruptionWarning is the detail of "EC2 Spot Instance Interruption
// Warning".
type SpotInterruptionWarning struct {
	Instance string `json:"instance-id"`
	// Action is what EC2 is about to do: terminate, stop or hibernate.
	Action string `json:"instance-action"`
}

// Kind is KindSpotWarning.
func (SpotInterruptionWarning) Kind() Kind { return KindSpotWarning }

// InstanceID is the instance to be interrupted.
func (m SpotInterruptionWarning) InstanceID() string { return m.Instance }

// RebalanceRecommendation is the detail of "EC2 Instance Rebalance
// Recommendation".
type RebalanceRecommendation struct {
	Instance string `json:"instance-id"`
}

// Kind is KindRebalance.
func (RebalanceRecommendation) Kind() Kind { return KindRebalance }

// InstanceID is the instance at risk.
func (m RebalanceRecommendation) InstanceID() string { return m.Instance }

// InstanceStateChange is the detail of "EC2 Instance State-change
// Notification".
type InstanceStateChange struct {
	Instance string `json:"instance-id"`
	// State is the instance's new state: pending, running, stopping,
	// stopped, shutting-down or terminated.
	State string `json:"state"`
}

// Kind is KindInstanceEnding for shutting-down and terminated, else
// KindInstanceState.
func (m InstanceStateChange) Kind() Kind {
	if m.State == "shutting-down" || m.State == "terminated" {
		return KindInstanceEnding
	}
	return KindInstanceState
}

// InstanceID is the instance whose state changed.
func (m InstanceStateChange) InstanceID() string { return m.Instance }

// TerminateLifecycleAction is the detail of "EC2 Instance-terminate
// Lifecycle Action": what CompleteLifecycleAction needs to let the group
// go on terminating the instance.
type TerminateLifecycleAction struct {
	Instance   string `json:"EC2InstanceId"`
	Group      string `json:"AutoScalingGroupName"`
	Hook       string `json:"LifecycleHookName"`
	Token      string `json:"LifecycleActionToken"`
	Transition string `json:"LifecycleTransition"`
}

// Kind is KindTerminateAction.
func (TerminateLifecycleAction) Kind() Kind { return KindTerminateAction }

// InstanceID is the instance waiting to terminate.
func (m TerminateLifecycleAction) InstanceID() string { return m.Instance }

// terminatingTransition is the only transition of a terminate lifecycle
// action.
const terminatingTransition = "autoscaling:EC2_INSTANCE_TERMINATING"

// parser reads one detail type's detail.
type parser struct {
	source string
	parse  func(detail json.RawMessage) (Message, error)
}

// parsers holds one parser per detail type handled.
var parsers = map[string]parser{
	SpotWarning: {SourceEC2, func(d json.RawMessage) (Message, error) {
		var m SpotInterruptionWarning
		err := decode(d, &m, need("instance-id", &m.Instance))
		return m, err
	}},
	Rebalance: {SourceEC2, func(d json.RawMessage) (Message, error) {
		var m RebalanceRecommendation
		err := decode(d, &m, need("instance-id", &m.Instance))
		return m, err
	}},
	StateChange: {SourceEC2, func(d json.RawMessage) (Message, error) {
		var m InstanceStateChange
		err := decode(d, &m, need("instance-id", &m.Instance), need("state", &m.State))
		return m, err
	}},
	TerminateHook: {SourceAutoScaling, func(d json.RawMessage) (Message, error) {
		var m TerminateLifecycleAction
		if err := decode(d, &m, need("EC2InstanceId", &m.Instance), need("AutoScalingGroupName", &m.Group),
			need("LifecycleHookName", &m.Hook)); err != nil {
			return m, err
		}
		if m.Transition != "" && m.Transition != terminatingTransition {
			return m, fmt.Errorf("LifecycleTransition is %q, want %s", m.Transition, terminatingTransition)
		}
		return m, nil
	}},
}

// field is a required detail field: its JSON name and where it was decoded.
type field struct {
	name  string
	value *string
}

func need(name string, value *string) field { return field{name, value} }

// decode reads a detail object into v and checks the required fields are
// there and not empty. Fields it does not know are ignored: the services
// add fields over time.
func decode(detail json.RawMessage, v any, required ...field) error {
	if len(bytes.TrimSpace(detail)) == 0 || bytes.Equal(bytes.TrimSpace(detail), []byte("null")) {
		return errors.New("no detail")
	}
	if err := json.Unmarshal(detail, v); err != nil {
		return err
	}
	for _, f := range required {
		if *f.value == "" {
			return fmt.Errorf("detail has no %s", f.name)
		}
	}
	return nil
}

// Parse reads an EventBridge event into its typed message. A detail type
// not handled (or from another source) gives ErrUnsupported; a detail that
// cannot be read, or lacks a field the handler needs, gives ErrMalformed.
func Parse(ev events.CloudWatchEvent) (Message, error) {
	p, ok := parsers[ev.DetailType]
	if !ok {
		return nil, fmt.Errorf("%w: %s %q", ErrUnsupported, ev.Source, ev.DetailType)
	}
	if ev.Source != p.source {
		return nil, fmt.Errorf("%w: %q comes from %s, not %q", ErrUnsupported, ev.DetailType, p.source, ev.Source)
	}
	m, err := p.parse(ev.Detail)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, ev.DetailType, err)
	}
	return m, nil
}
