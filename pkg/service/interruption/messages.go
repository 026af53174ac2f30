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
	// ReservationWarning is the two-minute warning of an interruptible
	// Capacity Reservation reclaiming its instances (Amazon EC2 User
	// Guide, "Monitor interruptible Capacity Reservations").
	ReservationWarning = "EC2 Capacity Reservation Instance Interruption Warning" // aws.ec2
	// ReservationWarningAlt is the same warning as another page of that
	// guide names it; both are accepted.
	ReservationWarningAlt = "EC2 Interruptible Capacity Reservation Instance Interruption Warning" // aws.ec2
	// HealthEvent carries AWS Health's scheduled changes (retirement,
	// maintenance, stop) of EC2 instances.
	HealthEvent = "AWS Health Event" // aws.health
)

// Event sources.
const (
	SourceEC2         = "aws.ec2"
	SourceAutoScaling = "aws.autoscaling"
	SourceHealth      = "aws.health"
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
	// KindInstanceEnding: the instance is shutting down, terminated or
	// stopped: its agents are gone.
	KindInstanceEnding Kind = "instance_ending"
	// KindInstanceStopping: the instance is stopping (its agents may still
	// report, but their jobs cannot finish).
	KindInstanceStopping Kind = "instance_stopping"
	// KindInstanceState: any other state change (pending, running), which
	// needs nothing.
	KindInstanceState Kind = "instance_state"
	// KindReservationWarning: an interruptible Capacity Reservation takes
	// the instance back in two minutes.
	KindReservationWarning Kind = "reservation_warning"
	// KindScheduledChange: AWS Health scheduled a change (retirement,
	// maintenance, stop) for the instances.
	KindScheduledChange Kind = "scheduled_change"
	// KindTestNotification: the group's test notification, sent when a
	// hook or notification is set up; it needs nothing.
	KindTestNotification Kind = "test_notification"
	// KindTerminateAction: the Auto Scaling group holds the instance in
	// Terminating:Wait until its lifecycle action is completed.
	KindTerminateAction Kind = "terminate_lifecycle_action"
	// KindNoInstance: an AWS Health scheduled change that names no
	// instance (a Dedicated Host's, or one without affected entities); it
	// needs nothing.
	KindNoInstance Kind = "no_instance"
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

// Kind is KindInstanceEnding for shutting-down, terminated and stopped,
// KindInstanceStopping for stopping, else KindInstanceState.
func (m InstanceStateChange) Kind() Kind {
	switch m.State {
	case "shutting-down", "terminated", "stopped":
		return KindInstanceEnding
	case "stopping":
		return KindInstanceStopping
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

// testNotification names the group's test notification (in Event, or in
// LifecycleTransition).
const testNotification = "autoscaling:TEST_NOTIFICATION"

// TestNotification is the group's test notification: no instance, nothing
// to do.
type TestNotification struct {
	Group string `json:"AutoScalingGroupName"`
	Event string `json:"Event"`
}

// Kind is KindTestNotification.
func (TestNotification) Kind() Kind { return KindTestNotification }

// InstanceID is empty: a test is about no instance.
func (TestNotification) InstanceID() string { return "" }

// ReservationInterruptionWarning is the detail of "EC2 Capacity
// Reservation Instance Interruption Warning".
type ReservationInterruptionWarning struct {
	Instance string `json:"instance-id"`
	// Action is what EC2 is about to do (terminate).
	Action string `json:"instance-action"`
	// TerminationTime is when, as the event says it (RFC 3339).
	TerminationTime string `json:"instance-termination-time"`
}

// Kind is KindReservationWarning.
func (ReservationInterruptionWarning) Kind() Kind { return KindReservationWarning }

// InstanceID is the instance to be interrupted.
func (m ReservationInterruptionWarning) InstanceID() string { return m.Instance }

// ScheduledChange is the detail of an AWS Health Event for EC2 in the
// scheduledChange category: the instances among its affected entities
// (values starting "i-"; hosts and other entities are left out).
type ScheduledChange struct {
	EventTypeCode string
	// StartTime is when the change is scheduled, as the event says it.
	StartTime string
	Instances []string
}

// Kind is KindScheduledChange.
func (ScheduledChange) Kind() Kind { return KindScheduledChange }

// InstanceID is the first instance affected (Instances holds them all).
func (m ScheduledChange) InstanceID() string {
	if len(m.Instances) == 0 {
		return ""
	}
	return m.Instances[0]
}

// ScheduledChangeWithoutInstance is an AWS Health scheduled change for EC2
// whose affected entities name no instance: a Dedicated Host's change names
// the host (h-...), and an event may name no entity at all. The rule on
// EC2's scheduled changes matches it all the same.
type ScheduledChangeWithoutInstance struct {
	EventTypeCode string
	// Entities are the affected entities the event names (none, or hosts
	// and other resources).
	Entities []string
}

// Kind is KindNoInstance.
func (ScheduledChangeWithoutInstance) Kind() Kind { return KindNoInstance }

// InstanceID is empty: the event names no instance.
func (ScheduledChangeWithoutInstance) InstanceID() string { return "" }

// healthDetail is the part of an AWS Health Event's detail the handler reads.
type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCode     string `json:"eventTypeCode"`
	EventTypeCategory string `json:"eventTypeCategory"`
	StartTime         string `json:"startTime"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
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
	if ev.Source != p.Source {
		return nil, fmt.Errorf("%w: %q comes from %s, not %q", ErrUnsupported, ev.DetailType, p.Source, ev.Source)
	}
	m, err := p.parse(ev.Detail)
	if errors.Is(err, errNotHandled) {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnsupported, ev.DetailType, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, ev.DetailType, err)
	}
	return m, nil
}
