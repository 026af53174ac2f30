package job

import (
	"encoding/json"
	"fmt"
	"time"
)

// Status is where a job is in its lifecycle.
type Status string

// The lifecycle: accepted → queued → leased → succeeded | queued (retry,
// preemption) | dead; accepted, queued or leased → canceled. A job is
// accepted from the moment the API answers its submission until the
// dispatch function files it in its fleet's queue.
const (
	Accepted  Status = "accepted"
	Queued    Status = "queued"
	Leased    Status = "leased"
	Succeeded Status = "succeeded"
	Dead      Status = "dead"
	Canceled  Status = "canceled"
)

// Terminal reports whether no transition leaves this status (an operator
// retry of a dead job aside).
func (s Status) Terminal() bool { return s == Succeeded || s == Dead || s == Canceled }

// Valid reports whether s is one of the six statuses.
func (s Status) Valid() bool {
	switch s {
	case Accepted, Queued, Leased, Succeeded, Dead, Canceled:
		return true
	}
	return false
}

// PreemptReason says why a worker gave a job back without failing it.
type PreemptReason string

// The reasons a worker may requeue a job without spending an attempt.
const (
	SpotInterruption PreemptReason = "spot_interruption"
	Rebalance        PreemptReason = "rebalance"
	Shutdown         PreemptReason = "shutdown"
	ScaleIn          PreemptReason = "scale_in"
)

// Reason is the transition reason a preemption records: the reason
// itself.
func (r PreemptReason) Reason() Reason { return Reason(r) }

// ParsePreemptReason accepts the four reasons of the protocol.
func ParsePreemptReason(s string) (PreemptReason, error) {
	switch r := PreemptReason(s); r {
	case SpotInterruption, Rebalance, Shutdown, ScaleIn:
		return r, nil
	}
	return "", fmt.Errorf("reason %q must be one of spot_interruption, rebalance, shutdown, scale_in", s)
}

// Error is what a worker (or the control plane) reports about a failed attempt.
type Error struct {
	Code      string `json:"code,omitempty" dynamodbav:"code,omitempty"`
	Message   string `json:"message" dynamodbav:"message"`
	Retryable bool   `json:"retryable" dynamodbav:"retryable"`
}

// Reason says why a job made a transition: it is recorded in the job's
// history, as the job's current reason and in its events. A preemption
// records its PreemptReason.
type Reason string

// Reasons the control plane itself records on a job.
const (
	ReasonLeaseExpired  Reason = "lease_expired"
	ReasonAttemptsSpent Reason = "attempts_exhausted"
	ReasonNotRetryable  Reason = "not_retryable"
	ReasonPreemptionCap Reason = "preemption_cap"
	// ReasonPreemptionCapOnDemand: the job reached its preemption cap and
	// its fleet has an On-Demand rung, so it waits for an On-Demand worker.
	ReasonPreemptionCapOnDemand Reason = "preemption_cap_on_demand"
	ReasonCanceled              Reason = "canceled"
	ReasonOperatorRetry         Reason = "operator_retry"
	ReasonWorkerGone            Reason = "worker_gone"
	ReasonQueueTimeout          Reason = "queue_timeout"
	ReasonRunTimeout            Reason = "run_timeout"
	ReasonDeregistered          Reason = "deregistered"
	ReasonCreated               Reason = "created"
	ReasonSucceeded             Reason = "succeeded"
	ReasonWorkerFailed          Reason = "worker_failed"
	// ReasonStale: the worker went unseen so long that the scaler removed
	// it (its instance is long gone).
	ReasonStale Reason = "stale"
	// ReasonLeaseUndone marks a claim taken back because the poll that made
	// it could not hand the lease to its worker; no attempt is spent.
	ReasonLeaseUndone Reason = "lease_undone"
)

// HistoryEntry records one transition of a job.
type HistoryEntry struct {
	At      time.Time `json:"at" dynamodbav:"at"`
	From    Status    `json:"from,omitempty" dynamodbav:"from,omitempty"`
	To      Status    `json:"to" dynamodbav:"to"`
	Reason  Reason    `json:"reason,omitempty" dynamodbav:"reason,omitempty"`
	Worker  string    `json:"worker_id,omitempty" dynamodbav:"worker,omitempty"`
	Attempt int       `json:"attempt,omitempty" dynamodbav:"attempt,omitempty"`
}

// HistoryLimit is how many transitions are kept when a job's history is
// rewritten; appends between rewrites can add at most two more (a lease and
// its completion), so a job never carries more than HistoryLimit+2 entries.
const HistoryLimit = 20

// Trim returns the newest entries of h, keeping room for `room` appends
// under HistoryLimit.
func Trim(h []HistoryEntry, room int) []HistoryEntry {
	keep := HistoryLimit - room
	if keep < 0 {
		keep = 0
	}
	if len(h) <= keep {
		return h
	}
	return append([]HistoryEntry(nil), h[len(h)-keep:]...)
}

// Job is the control plane's record of one unit of work.
type Job struct {
	ID         string
	TenantID   string
	WorkflowID string
	FleetSlug  string
	Status     Status
	Priority   int

	// Attempts counts attempts spent: a lease starts one, a preemption gives it back.
	Attempts       int
	MaxAttempts    int
	Preemptions    int
	MaxPreemptions int
	// OnDemandOnly is set when the job reached its preemption cap in a fleet
	// with an On-Demand rung: only On-Demand workers may lease it from then on.
	OnDemandOnly bool

	TimeoutSeconds      int
	QueueTimeoutSeconds int

	Input  json.RawMessage
	Result json.RawMessage
	Error  *Error

	CreatedAt time.Time
	UpdatedAt time.Time
	// NotBefore is when a job waiting out a retry backoff may be leased again.
	NotBefore time.Time
	// FirstLeasedAt is when the job was first leased (zero until then).
	FirstLeasedAt time.Time
	LeasedAt      time.Time

	// LeaseToken fences the current (or, once released, the last) lease.
	LeaseToken     string
	LeaseExpiresAt time.Time
	WorkerID       string
	Progress       *float64

	// Reason is why the job is in its current status (e.g. lease_expired, preemption_cap).
	Reason Reason
	// CancelRequested is set when an operator canceled the job while it was leased.
	CancelRequested bool
	// CostUSD is what the finished job cost, in dollars; nil until its
	// outcome is relayed, or when it could not be priced.
	CostUSD *float64

	History []HistoryEntry

	// CallbackURL receives the job's outcomes; Callback is how the delivery
	// of the latest one went (nil until an outcome is announced).
	CallbackURL string
	Callback    *Callback
}

// The states of a callback delivery.
const (
	CallbackPending   = "pending"
	CallbackDelivered = "delivered"
	CallbackFailed    = "failed"
)

// Callback is the delivery of a job's latest outcome to its callback URL.
type Callback struct {
	// EventID is the outcome's event id (the Fleetq-Event-Id header).
	EventID string
	// State is pending, delivered or failed (given up after the stage's
	// webhooks.max_attempts).
	State    string
	Attempts int
	// DeliveredAt is set once delivered, FailedAt once given up,
	// NextAttemptAt while a retry waits.
	DeliveredAt   time.Time
	FailedAt      time.Time
	NextAttemptAt time.Time
	LastError     string
}

// Priority bounds: higher runs first.
const (
	MinPriority = -1000
	MaxPriority = 1000
)

// Summary is a job as the store's state index knows it: no input, result or
// history. Listings answer summaries so they never read whole jobs.
type Summary struct {
	ID          string
	TenantID    string
	WorkflowID  string
	Fleet       string
	Status      Status
	Priority    int
	Attempts    int
	MaxAttempts int
	Preemptions int
	WorkerID    string
	Reason      Reason
	ErrorCode   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}
