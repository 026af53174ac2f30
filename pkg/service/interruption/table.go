package interruption

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Rule is one of the stage's EventBridge rules that route events to the
// handler: its construct id in the stack and its name after the stage's
// prefix. Detail types of one source and one detail filter share a rule.
type Rule struct {
	ID   string
	Name string
}

// The stage's rules of events (the schedule's sweep has its own).
var (
	RuleSpotAndRebalance = Rule{ID: "SpotAndRebalance", Name: "spot-rebalance"}
	RuleInstanceState    = Rule{ID: "InstanceStopping", Name: "instance-state"}
	RuleHealth           = Rule{ID: "HealthScheduledChange", Name: "health-scheduled"}
	RuleTerminateHook    = Rule{ID: "TerminateLifecycle", Name: "terminate-hook"}
)

// Handled is one EventBridge event the handler takes: who sends it, the
// rule that routes it, how its detail is read and the kinds of message that
// reading may give (each kind's action is in the action table). The
// parsers, the stack's rules and docs/scaling.md's table are all made from
// HandledEvents: adding an event is one row here and its parser.
type Handled struct {
	Source     string
	DetailType string
	Rule       Rule
	// Detail narrows the rule's pattern to the details handled (nil: every
	// detail of the type).
	Detail map[string][]string
	// OfGroups narrows the rule to the stage's own Auto Scaling groups (by
	// AutoScalingGroupName, which the stack knows).
	OfGroups bool
	// Kinds are the kinds of message the parser may give.
	Kinds []Kind
	parse func(detail json.RawMessage) (Message, error)
}

// handled is the table, in the order of docs/scaling.md.
var handled = []Handled{
	{Source: SourceEC2, DetailType: SpotWarning, Rule: RuleSpotAndRebalance, Kinds: []Kind{KindSpotWarning}, parse: parseSpotWarning},
	{Source: SourceEC2, DetailType: Rebalance, Rule: RuleSpotAndRebalance, Kinds: []Kind{KindRebalance}, parse: parseRebalance},
	{Source: SourceEC2, DetailType: ReservationWarning, Rule: RuleSpotAndRebalance, Kinds: []Kind{KindReservationWarning}, parse: parseReservationWarning},
	{Source: SourceEC2, DetailType: ReservationWarningAlt, Rule: RuleSpotAndRebalance, Kinds: []Kind{KindReservationWarning}, parse: parseReservationWarning},
	{Source: SourceAutoScaling, DetailType: TerminateHook, Rule: RuleTerminateHook, OfGroups: true,
		Kinds: []Kind{KindTerminateAction, KindTestNotification}, parse: parseTerminateHook},
	{Source: SourceEC2, DetailType: StateChange, Rule: RuleInstanceState,
		Detail: map[string][]string{"state": {"stopping", "stopped", "shutting-down", "terminated"}},
		Kinds:  []Kind{KindInstanceStopping, KindInstanceEnding, KindInstanceState}, parse: parseStateChange},
	{Source: SourceHealth, DetailType: HealthEvent, Rule: RuleHealth,
		Detail: map[string][]string{"service": {"EC2"}, "eventTypeCategory": {"scheduledChange"}},
		Kinds:  []Kind{KindScheduledChange, KindNoInstance}, parse: parseHealthEvent},
}

// HandledEvents answers the table of handled events.
func HandledEvents() []Handled { return slices.Clone(handled) }

// Does says what the handler does with a kind of message (docs/scaling.md).
func Does(k Kind) string { return actions[k].does }

// parsers is the table by detail type.
var parsers = func() map[string]Handled {
	m := make(map[string]Handled, len(handled))
	for _, h := range handled {
		m[h.DetailType] = h
	}
	return m
}()

func parseSpotWarning(d json.RawMessage) (Message, error) {
	var m SpotInterruptionWarning
	err := decode(d, &m, need("instance-id", &m.Instance))
	return m, err
}

func parseRebalance(d json.RawMessage) (Message, error) {
	var m RebalanceRecommendation
	err := decode(d, &m, need("instance-id", &m.Instance))
	return m, err
}

func parseStateChange(d json.RawMessage) (Message, error) {
	var m InstanceStateChange
	err := decode(d, &m, need("instance-id", &m.Instance), need("state", &m.State))
	return m, err
}

func parseTerminateHook(d json.RawMessage) (Message, error) {
	var t TestNotification
	var transition struct {
		Transition string `json:"LifecycleTransition"`
	}
	if decode(d, &t) == nil && json.Unmarshal(d, &transition) == nil &&
		(t.Event == testNotification || transition.Transition == testNotification) {
		return t, nil
	}
	var m TerminateLifecycleAction
	if err := decode(d, &m, need("EC2InstanceId", &m.Instance), need("AutoScalingGroupName", &m.Group),
		need("LifecycleHookName", &m.Hook)); err != nil {
		return m, err
	}
	if m.Transition != "" && m.Transition != terminatingTransition {
		return m, fmt.Errorf("LifecycleTransition is %q, want %s", m.Transition, terminatingTransition)
	}
	return m, nil
}

func parseReservationWarning(d json.RawMessage) (Message, error) {
	var m ReservationInterruptionWarning
	err := decode(d, &m, need("instance-id", &m.Instance))
	return m, err
}

func parseHealthEvent(d json.RawMessage) (Message, error) {
	var h healthDetail
	if err := decode(d, &h, need("service", &h.Service), need("eventTypeCategory", &h.EventTypeCategory)); err != nil {
		return nil, err
	}
	if h.Service != "EC2" || h.EventTypeCategory != "scheduledChange" {
		return nil, fmt.Errorf("%w: %s %s event", errNotHandled, h.Service, h.EventTypeCategory)
	}
	m := ScheduledChange{EventTypeCode: h.EventTypeCode, StartTime: h.StartTime}
	var others []string
	for _, e := range h.AffectedEntities {
		if strings.HasPrefix(e.EntityValue, "i-") {
			m.Instances = append(m.Instances, e.EntityValue)
		} else if e.EntityValue != "" {
			others = append(others, e.EntityValue)
		}
	}
	if len(m.Instances) == 0 {
		return ScheduledChangeWithoutInstance{EventTypeCode: h.EventTypeCode, Entities: others}, nil
	}
	return m, nil
}

// errNotHandled marks a detail of a handled detail type that asks for
// nothing this handler does (Parse reports it as ErrUnsupported).
var errNotHandled = errors.New("not handled")

// ActionKinds answers the kinds that have an action, in order.
func ActionKinds() []Kind {
	ks := make([]Kind, 0, len(actions))
	for k := range actions {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
