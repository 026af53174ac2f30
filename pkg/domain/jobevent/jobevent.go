// Package jobevent is what the control plane announces about a job: an
// event per lifecycle transition (EventBridge's detail-types and the
// detail's JSON, docs/events.md), the publisher that delivers them, and the
// outcomes due at a job's callback URL. The store files events in its
// outbox in the transaction of the transition; the relay
// (pkg/service/jobevents) publishes them and the webhook deliverer
// (pkg/service/webhook) posts the callbacks.
package jobevent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// Job lifecycle events (EventBridge detail-types).
const (
	Succeeded = "Job Succeeded"
	Failed    = "Job Failed" // a failed attempt that will be retried
	Dead      = "Job Dead"
	Canceled  = "Job Canceled"
)

// Event is one announced transition.
type Event struct {
	// ID is stable across redelivery: consumers deduplicate by it.
	ID         string
	DetailType string
	Time       time.Time
	Detail     Detail
}

// Detail is the event's detail.
type Detail struct {
	EventID        string          `json:"event_id"`
	JobID          string          `json:"job_id"`
	TenantID       string          `json:"tenant_id"`
	WorkflowID     string          `json:"workflow_id"`
	FleetSlug      string          `json:"fleet_slug"`
	Status         string          `json:"status"`
	Reason         job.Reason      `json:"reason,omitempty"`
	Attempts       int             `json:"attempts"`
	Preemptions    int             `json:"preemptions"`
	QueuedSeconds  float64         `json:"queued_seconds"`
	RunningSeconds float64         `json:"running_seconds"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *job.Error      `json:"error,omitempty"`
	// CostUSD is an outcome's cost (docs/scaling.md, "Cost per job"),
	// absent when the job could not be priced and on a failed attempt.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// Publisher delivers events (EventBridge in AWS, an in-process bus in dev).
// It returns an error unless every event was accepted.
type Publisher interface {
	Publish(ctx context.Context, events []Event) error
}

// Callback is one outcome due for delivery to a job's callback URL.
type Callback struct {
	JobID string
	URL   string
	// Event is the outcome, as the event bus receives it.
	Event Event
	// Attempts is how many deliveries were tried before this one.
	Attempts int
}

// CallbackResult is how one delivery attempt went.
type CallbackResult struct {
	// Delivered: the receiver answered 2xx. Otherwise Err says why not,
	// and NextAt is when to try again; a zero NextAt gives up (failed).
	Delivered bool
	Err       string
	NextAt    time.Time
}
