package fleetstate

import (
	"encoding/json"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/forecast"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// DecisionHistory is how many decisions a fleet keeps besides the last.
const DecisionHistory = 20

// Backlog is a fleet's live work, counted from the job records.
type Backlog struct {
	Ready   int // queued and due
	Delayed int // queued, waiting out a retry backoff
	Leased  int // being processed
}

// Queued is every queued job, due or not.
func (b Backlog) Queued() int { return b.Ready + b.Delayed }

// Snapshot is a fleet's live work as the scaler sees it, read from the
// ready, delayed and leased partitions of the index only.
type Snapshot struct {
	Backlog
	// OldestReady is when the oldest ready job was created (zero: none).
	OldestReady time.Time
	// LeasesByWorker counts leased jobs per worker.
	LeasesByWorker map[string]int
	// OnDemandOnlyReady and OnDemandOnlyLeased count the ready and leased
	// jobs only On-Demand workers may lease (reached the preemption cap in
	// a fleet with an On-Demand rung); they are part of Ready and Leased.
	OnDemandOnlyReady, OnDemandOnlyLeased int
	// ReadyByTenant and LeasedByTenant count ready and leased jobs per
	// tenant; they are read only when some tenant has a max_leased cap
	// (nil otherwise), for the scaler to size to the work the caps allow.
	ReadyByTenant, LeasedByTenant map[string]int
	// Created are when the ready and leased jobs were created (the
	// forecast counts those created since the previous tick as arrivals).
	Created []time.Time
}

// ArrivedAfter counts the ready and leased jobs created after t (a retried
// job keeps its creation time, so it is not counted again).
func (s Snapshot) ArrivedAfter(t time.Time) int {
	n := 0
	for _, c := range s.Created {
		if c.After(t) {
			n++
		}
	}
	return n
}

// Forecast is the forecast's memory in a fleet's state: its hours of
// demand, the warm time it spent today, and when a tick last updated them.
type Forecast struct {
	Hours  forecast.History
	Budget forecast.Budget
	At     time.Time
}

// Outcomes summarizes the jobs of a fleet that ended since a time.
type Outcomes struct {
	Succeeded, Dead int
	// Runs are the last attempts' run times of the succeeded jobs, sorted.
	Runs []time.Duration
}

// Decision is a scaling decision as recorded for a fleet: a tick's, or one
// made on enqueue (a wake, bridges started). It is stored as its
// DecisionRecord.
type Decision struct {
	At      time.Time
	Desired int
	// Reason says why, made by the scaling package's constructors.
	Reason    scaling.Reason
	Victims   []string
	Inputs    Inputs
	InService int
}

// DecisionRecord is a decision as stored and as JSON, the layout every
// release reads: the reason's line under reason, as every release wrote
// it, and its code beside it (reason_code, absent from records written
// before codes were kept); the inputs as their map of counts (Inputs.Map).
type DecisionRecord struct {
	At         time.Time          `dynamodbav:"at" json:"at"`
	Desired    int                `dynamodbav:"desired" json:"desired"`
	Reason     string             `dynamodbav:"reason" json:"reason"`
	ReasonCode scaling.ReasonCode `dynamodbav:"reason_code,omitempty" json:"reason_code,omitempty"`
	Victims    []string           `dynamodbav:"victims,omitempty" json:"victims,omitempty"`
	Inputs     map[string]int     `dynamodbav:"inputs,omitempty" json:"inputs,omitempty"`
	InService  int                `dynamodbav:"in_service" json:"in_service"`
}

// Record is the decision in its stored layout.
func (d Decision) Record() DecisionRecord {
	return DecisionRecord{At: d.At, Desired: d.Desired, Reason: d.Reason.String(), ReasonCode: d.Reason.Code(),
		Victims: d.Victims, Inputs: d.Inputs.Map(), InService: d.InService}
}

// Decision reads a decision any release stored.
func (r DecisionRecord) Decision() Decision {
	return Decision{At: r.At, Desired: r.Desired, Reason: scaling.RecordedReason(r.ReasonCode, r.Reason),
		Victims: r.Victims, Inputs: InputsFrom(r.Inputs), InService: r.InService}
}

// MarshalJSON writes the decision in its stored layout (DecisionRecord).
func (d Decision) MarshalJSON() ([]byte, error) { return json.Marshal(d.Record()) }

// State is what fleetq keeps per fleet besides its jobs and workers.
type State struct {
	Slug    string
	Workers int
	// Desired and InService are the capacity the scaler last saw or set.
	Desired   int
	InService int
	// LastActiveAt is when the fleet last had queued or leased work.
	LastActiveAt time.Time
	LastDecision *Decision
	// History is the fleet's recent decisions, newest first (at most
	// DecisionHistory); FirstSeen is when each live instance was first seen.
	History   []Decision
	FirstSeen map[string]time.Time
	// WokenAt is the last wake-on-enqueue.
	WokenAt time.Time
	// Forecast is the forecast's memory (zero for a fleet without one).
	Forecast Forecast
	// Seq counts the decisions written (ticks and wakes); a decision is
	// written only on the state it was made from.
	Seq int64
	// Boots are the fleet's latest boots, launch to registration, oldest
	// first (at most BootSamples): kept by the tick, so a fleet back at
	// zero still knows how long its instances take.
	Boots []time.Duration
}

// BootSamples is how many of its latest boots a fleet keeps.
const BootSamples = 10

// LastTick is the scaler's tick's last decision for the fleet (false:
// none): the newest of its decisions that is a tick's, not a wake's or a
// bridge start's.
func (s State) LastTick() (Decision, bool) {
	ds := s.History
	if s.LastDecision != nil {
		ds = append([]Decision{*s.LastDecision}, ds...)
	}
	for _, d := range ds {
		switch d.Reason.Code() {
		case scaling.ReasonGrow, scaling.ReasonShrink, scaling.ReasonHold:
			return d, true
		}
	}
	return Decision{}, false
}

// WithBoots is the latest BootSamples of kept and then more.
func WithBoots(kept, more []time.Duration) []time.Duration {
	all := append(append([]time.Duration(nil), kept...), more...)
	return all[max(0, len(all)-BootSamples):]
}

// Record is what the scaler writes after a tick.
type Record struct {
	Decision     Decision
	LastActiveAt time.Time
	// FirstSeen is when each live instance of the group was first seen (the
	// group does not report launch times; the boot timeout runs from this).
	FirstSeen map[string]time.Time
	// Forecast, when set, replaces the forecast's memory.
	Forecast *Forecast
	// Boots, when set, replaces the fleet's latest boots (State.Boots).
	Boots []time.Duration
}

// InterruptionKind is what ended or threatened an instance, as counted.
type InterruptionKind string

// Interruption kinds.
const (
	// InterruptSpot is a Spot interruption warning.
	InterruptSpot InterruptionKind = "spot"
	// InterruptRebalance is a rebalance recommendation.
	InterruptRebalance InterruptionKind = "rebalance"
	// InterruptTerminated is an instance that terminated under a worker.
	InterruptTerminated InterruptionKind = "terminated"
	// InterruptReservation is an interruptible Capacity Reservation's
	// warning.
	InterruptReservation InterruptionKind = "reservation"
	// InterruptScheduled is an AWS Health scheduled change.
	InterruptScheduled InterruptionKind = "scheduled"
)

// Interruption is one interruption event of a fleet's instance.
type Interruption struct {
	EventID      string
	Fleet        string
	Kind         InterruptionKind
	InstanceType string
	AZ           string
	At           time.Time
}

// InterruptionCount is one one-minute bucket's count of a kind of
// interruption on an instance type in an availability zone.
type InterruptionCount struct {
	Minute       string
	Kind         InterruptionKind
	InstanceType string
	AZ           string
	Count        int
}
