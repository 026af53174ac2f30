package scaling

import "fmt"

// ReasonCode is what kind of decision a reason explains, in one word that
// readers can match on without parsing the reason's text.
type ReasonCode string

// Reason codes.
const (
	// ReasonGrow, ReasonShrink and ReasonHold are a tick's decision (Decide):
	// the desired capacity went up, down, or stayed.
	ReasonGrow   ReasonCode = "grow"
	ReasonShrink ReasonCode = "shrink"
	ReasonHold   ReasonCode = "hold"
	// ReasonWake is a wake on enqueue: a fleet raised from zero by
	// dispatch (WakeReason).
	ReasonWake ReasonCode = "wake"
	// ReasonBridge is bridge instances started on enqueue
	// (BridgeStartReason).
	ReasonBridge ReasonCode = "bridge"
)

// Reason says why a scaling decision was made: its code and the one line
// recorded with it. Reasons are made by the constructors of this package
// (Decide and its kin, WakeReason, BridgeStartReason), and grow only by
// With, so each kind of reason is worded in one place. The zero Reason says
// nothing.
type Reason struct {
	code ReasonCode
	text string
}

// RecordedReason is a reason as a record holds it: its code ("" for a
// record written before codes were kept) and its text, as written.
func RecordedReason(code ReasonCode, text string) Reason {
	return Reason{code: code, text: text}
}

// Code is what kind of decision the reason explains ("" when unknown: a
// record written before codes were kept).
func (r Reason) Code() ReasonCode { return r.code }

// String is the reason's one line.
func (r Reason) String() string { return r.text }

// Says reports whether two reasons say the same thing (the same line; a
// record written before codes were kept says what it said).
func (r Reason) Says(o Reason) bool { return r.text == o.text }

// With is the reason followed by one more part ("; part"); an empty part
// adds nothing.
func (r Reason) With(part string) Reason {
	switch {
	case part == "":
		return r
	case r.text == "":
		r.text = part
	default:
		r.text += "; " + part
	}
	return r
}

// Advisory is the reason of a decision that was not applied (no capacity
// is attached): the same reason, saying so first.
func (r Reason) Advisory() Reason {
	r.text = "advisory, no capacity attached: " + r.text
	return r
}

// decided is a tick's reason: grow, shrink or hold from the capacity the
// group had to the desired capacity, and why.
func decided(from, to int, why string) Reason {
	switch {
	case to > from:
		return Reason{ReasonGrow, fmt.Sprintf("grow %d→%d: %s", from, to, why)}
	case to < from:
		return Reason{ReasonShrink, fmt.Sprintf("shrink %d→%d: %s", from, to, why)}
	}
	return Reason{ReasonHold, fmt.Sprintf("hold %d: %s", to, why)}
}

// WakeReason is the reason of a wake on enqueue: the ready jobs that woke
// the fleet.
func WakeReason(ready int) Reason {
	if ready == 1 {
		return Reason{ReasonWake, "woken by 1 ready job"}
	}
	return Reason{ReasonWake, fmt.Sprintf("woken by %d ready jobs", ready)}
}

// BridgeStartReason says why start bridge instances start: the ready jobs,
// the idle workers that could not take them, and what Spot is doing — the
// tick's decision (DecideBridge, as a part of its reason) and the wake on
// enqueue say it alike.
func BridgeStartReason(start, ready, idle int, spot SpotState) Reason {
	return Reason{ReasonBridge, fmt.Sprintf("bridge %d: %d ready jobs, %d idle workers, %s", start, ready, idle, spot)}
}

// SpotState is what the Spot group is doing for the work bridges start
// for, as a bridge's reason says it.
type SpotState struct {
	state spotDoing
	max   int
}

type spotDoing int

const (
	spotNotLaunching spotDoing = iota
	spotLaunching
	spotAtMax
	spotNextTick
)

// The Spot group's states a bridge's reason names.
var (
	// SpotNotLaunching: no Spot launch is asked for or booting.
	SpotNotLaunching = SpotState{state: spotNotLaunching}
	// SpotLaunching: Spot launches are asked for or booting.
	SpotLaunching = SpotState{state: spotLaunching}
	// SpotNextTick: a wake on enqueue that did not raise the Spot group;
	// the next tick does.
	SpotNextTick = SpotState{state: spotNextTick}
)

// SpotAtMax is the Spot group at its maximum size max.
func SpotAtMax(max int) SpotState { return SpotState{state: spotAtMax, max: max} }

// String is the state in a reason's words.
func (s SpotState) String() string {
	switch s.state {
	case spotLaunching:
		return "Spot launching"
	case spotAtMax:
		return fmt.Sprintf("Spot at its max %d", s.max)
	case spotNextTick:
		return "Spot raised by the next tick"
	}
	return "Spot not launching"
}
