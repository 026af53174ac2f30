package worker

import (
	"encoding/json"
	"time"
)

// Status is whether a worker may take new work.
type Status string

// Worker statuses.
const (
	// Active workers lease jobs.
	Active Status = "active"
	// Draining workers finish their leases and take no new ones.
	Draining Status = "draining"
	// Revoked workers' tokens no longer work.
	Revoked Status = "revoked"
	// Unhealthy workers reported their machine sick (a GPU, or a runner
	// that stays down): like draining workers they take no new work, and
	// once idle the scaler replaces their instance.
	Unhealthy Status = "unhealthy"
)

// Worker is a registered worker.
type Worker struct {
	ID           string
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
	Status         Status
	Approved       bool
	Leases         int
	RegisteredAt   time.Time
	LastSeenAt     time.Time
	// LastReleaseAt is when the worker last gave up a lease (zero if never).
	LastReleaseAt time.Time
	// LastClaimAt is when the worker last leased a job (zero if never).
	LastClaimAt time.Time
	// SourceIP is the address the worker last registered from.
	SourceIP string
	// AgentVersion is the fleetq version the agent reported at its last
	// registration (empty for an agent that reports none).
	AgentVersion string
	// Boot is when the worker's instance launched (or started from a warm
	// pool), its agent started, its runner became ready and warmed up, as
	// the agent reported at registration (zero when not reported).
	Boot Boot
	// FirstClaimAt is when the worker leased its first job (zero: none yet).
	FirstClaimAt time.Time
}

// Boot is an instance's way to its first job, up to registration: when it
// launched, its agent started, its runner answered ready and its runner's
// warm-up ended (zero: not reported, or no warm-up).
type Boot struct {
	LaunchedAt, AgentStartedAt, RunnerReadyAt, WarmedUpAt time.Time
	// FromPool says LaunchedAt is the instance's start from a warm pool (a
	// bridge), not its launch.
	FromPool bool
	// SpotPool says LaunchedAt is the instance's start from the fleet's
	// stopped Spot pool (the API sets it when the attestation found the
	// instance in the pool), not its launch nor a bridge's start.
	SpotPool bool
}

// IdleSince is when the worker last held no lease: its last release, or its
// registration if it never had one. It is zero while it holds a lease.
func (w Worker) IdleSince() time.Time {
	if w.Leases > 0 {
		return time.Time{}
	}
	if w.LastReleaseAt.After(w.RegisteredAt) {
		return w.LastReleaseAt
	}
	return w.RegisteredAt
}

// BootReport is what an instance's agent reported instead of registering:
// its machine cannot work (Problem, e.g. the runner's program is not on
// its image), for its own instance of its fleet.
type BootReport struct {
	Fleet        string
	InstanceID   string
	WorkerID     string
	InstanceType string
	ImageID      string
	Problem      string
	Message      string
	AgentVersion string
	At           time.Time
}
