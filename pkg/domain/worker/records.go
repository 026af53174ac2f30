package worker

import (
	"encoding/json"
	"time"
)

// Auth is what a worker's bearer token proves: who it is, its fleet, and
// the digest the stored token must match. Every worker operation re-checks
// the digest inside its own conditional write, so a rotated or revoked token
// stops working atomically with the change.
type Auth struct {
	WorkerID  string
	Fleet     string
	TokenHash string
}

// Registration is a worker announcing itself.
type Registration struct {
	WorkerID     string
	Fleet        string
	Stage        string
	InstanceID   string
	InstanceType string
	AZ           string
	// PurchaseOption is "spot" or "on-demand" ("" when not reported).
	PurchaseOption string
	Capabilities   json.RawMessage
	Providers      []string
	MaxConcurrency int
	TokenHash      string
	SourceIP       string
	// AgentKeyHash is the digest of the registering agent's own key (kept
	// on its disk): a registration with another key is refused while the
	// worker id's registration is live, so two agents never share an id.
	AgentKeyHash string
	// AgentVersion is the version the agent reported (empty if none).
	AgentVersion string
	// Boot is the instance's boot timeline the agent reported (zero times:
	// not reported).
	Boot Boot
}

// Termination is an instance held in Terminating:Wait by its group's
// terminate lifecycle hook while its workers drain: what completing or
// heartbeating the action needs, and until when the running jobs may go on.
type Termination struct {
	InstanceID string
	Fleet      string
	Group      string
	Hook       string
	Token      string
	// StartedAt is when the lifecycle action began (the event's time).
	StartedAt time.Time
	// Deadline is when the jobs still running are requeued and the action
	// completed all the same (StartedAt plus the fleet's drain timeout).
	Deadline time.Time
	// HeartbeatAt is when the action's heartbeat timeout last restarted.
	HeartbeatAt time.Time
}
