package wire

import (
	"encoding/json"
	"time"
)

// FleetsResponse is the 200 answer of GET /api/admin/fleets.
type FleetsResponse struct {
	Fleets []Fleet `json:"fleets"`
}

// Fleet is one fleet's backlog, capacity and scaling decisions.
type Fleet struct {
	FleetSlug string   `json:"fleet_slug"`
	Stage     string   `json:"stage"`
	Workflows []string `json:"workflows"`
	// Queued counts every queued job (due or waiting out a backoff).
	Queued int `json:"queued"`
	Leased int `json:"leased"`
	// Desired and InService are what the scaler last set and saw.
	Desired      int       `json:"desired"`
	InService    int       `json:"in_service"`
	Workers      int       `json:"workers"`
	Min          int       `json:"min"`
	Max          int       `json:"max"`
	LastDecision *Decision `json:"last_decision"`
	// History is the fleet's recent decisions, newest first, with ?history=true.
	History []Decision `json:"history,omitempty"`
	// OutdatedAgents counts the fleet's workers whose agent is of an older
	// release than the API's (Worker.AgentOutdated).
	OutdatedAgents int `json:"outdated_agents"`
	// Boot is the boot timeline of the fleet's registered workers (omitted
	// when none reported one).
	Boot *FleetBoot `json:"boot,omitempty"`
	// BootProblems are the fleet's instances that reported in the last day
	// that they cannot work (POST /api/worker/boot-report), newest first
	// (omitted when none did).
	BootProblems []BootProblem `json:"boot_problems,omitempty"`
}

// BootProblem is one instance's boot report.
type BootProblem struct {
	InstanceID   string `json:"instance_id"`
	WorkerID     string `json:"worker_id"`
	InstanceType string `json:"instance_type,omitempty"`
	ImageID      string `json:"image_id,omitempty"`
	Problem      string `json:"problem"`
	Message      string `json:"message"`
	AgentVersion string `json:"agent_version,omitempty"`
	ReportedAt   string `json:"reported_at"`
}

// FleetBoot is a fleet's boot timeline over its registered workers: each
// phase's median and longest, in order, and the phase with the longest
// median.
type FleetBoot struct {
	Workers int         `json:"workers"`
	Phases  []BootPhase `json:"phases"`
	Slowest string      `json:"slowest"`
}

// BootPhase is one phase of the way from launch to the first job.
type BootPhase struct {
	// Name is <from>_to_<to>, between two consecutive moments a worker
	// reported: launch, pool_start (an instance started from a warm pool:
	// a bridge) or spot_pool_start (started from the fleet's stopped Spot
	// pool), agent, runner_ready, warmed_up (a fleet with a warm-up),
	// registered, first_lease (launch_to_agent, pool_start_to_agent,
	// spot_pool_start_to_agent, runner_ready_to_warmed_up, ...). P50S, P95S
	// and MaxS are its median, 95th percentile (nearest rank) and longest.
	Name    string  `json:"name"`
	Workers int     `json:"workers"`
	P50S    float64 `json:"p50_s"`
	P95S    float64 `json:"p95_s"`
	MaxS    float64 `json:"max_s"`
}

// Decision is one scaling decision.
type Decision struct {
	At      *string `json:"at"`
	Desired int     `json:"desired"`
	Reason  string  `json:"reason"`
	// ReasonCode is the reason's kind: grow, shrink or hold (a tick),
	// wake or bridge (on enqueue); omitted for a decision recorded before
	// codes were kept.
	ReasonCode string `json:"reason_code,omitempty"`
	// Victims are the instances terminated, each with why.
	Victims []string `json:"victims,omitempty"`
	// InService and Inputs are what the decision saw (instances in service;
	// ready, leased, booting, busy, idle ... counts).
	InService int            `json:"in_service"`
	Inputs    map[string]int `json:"inputs,omitempty"`
}

// WorkersResponse is the 200 answer of GET /api/admin/workers.
type WorkersResponse struct {
	Workers []Worker `json:"workers"`
}

// Worker is a registered worker as an operator sees it.
type Worker struct {
	WorkerID         string `json:"worker_id"`
	FleetSlug        string `json:"fleet_slug"`
	InstanceID       string `json:"instance_id"`
	InstanceType     string `json:"instance_type,omitempty"`
	AvailabilityZone string `json:"availability_zone,omitempty"`
	// PurchaseOption is "spot" or "on-demand", omitted when not reported.
	PurchaseOption string `json:"purchase_option,omitempty"`
	Status         string `json:"status"`
	Approved       bool   `json:"approved"`
	// Leases is how many jobs the worker holds.
	Leases         int     `json:"leases"`
	MaxConcurrency int     `json:"max_concurrency"`
	LastSeenAt     *string `json:"last_seen_at"`
	RegisteredAt   *string `json:"registered_at"`
	// AgentVersion is the version the agent reported at registration.
	AgentVersion string `json:"agent_version"`
	// VersionMismatch says the agent is not the API's build (or reported no
	// version): upgrade it (docs/deploy.md).
	VersionMismatch bool `json:"version_mismatch"`
	// AgentOutdated says the agent is of an older release than the API's
	// (both release versions, the agent's first): the instance still runs
	// the previous release's agent after an upgrade (docs/deploy.md,
	// "Upgrading a stage"). False when either version is not a release.
	AgentOutdated bool `json:"agent_outdated"`
	// Capabilities are the facts the agent registered: its GPUs and the
	// driver's CUDA version (docs/worker.md, Health).
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
}

// WorkerActionResponse is the 200 answer of
// POST /api/admin/workers/{worker_id}/{action}.
type WorkerActionResponse struct {
	Worker Worker `json:"worker"`
	// Token is the new worker token, only for rotate-token.
	Token string `json:"token,omitempty"`
}

// JobsResponse is the 200 answer of GET /api/admin/jobs and GET /api/jobs.
// NextCursor, on GET /api/jobs only, is the cursor of the next page;
// absent after the last.
type JobsResponse struct {
	Jobs       []JobSummary `json:"jobs"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// JobSummary is a job in an operator's list.
type JobSummary struct {
	JobID       string  `json:"job_id"`
	TenantID    string  `json:"tenant_id"`
	WorkflowID  string  `json:"workflow_id"`
	FleetSlug   string  `json:"fleet_slug"`
	Status      string  `json:"status"`
	Reason      string  `json:"reason,omitempty"`
	ErrorCode   string  `json:"error_code,omitempty"`
	Attempts    int     `json:"attempts"`
	Preemptions int     `json:"preemptions"`
	UpdatedAt   *string `json:"updated_at"`
	// EstimatedStartAt is a queued job's expected start, as GET
	// /api/jobs/{job_id} answers it (absent when it cannot say, and for a
	// job not queued).
	EstimatedStartAt *string `json:"estimated_start_at,omitempty"`
}

// RejectedResponse is the 200 answer of GET /api/admin/rejected.
type RejectedResponse struct {
	Rejected []Rejection `json:"rejected"`
}

// Rejection is a submission dispatch could never accept.
type Rejection struct {
	MessageID string `json:"message_id"`
	Source    string `json:"source"`
	Reason    string `json:"reason"`
	// Body is the first 4 KiB of the submission.
	Body string    `json:"body"`
	At   time.Time `json:"at"`
}

// CostsResponse is the 200 answer of GET /api/admin/costs: the cost of the
// jobs that finished since the hour of Since, by tenant, fleet and
// workflow, most expensive first.
type CostsResponse struct {
	Since  time.Time   `json:"since"`
	Groups []CostGroup `json:"groups"`
	// TotalUSD is the sum of the groups' costs.
	TotalUSD float64 `json:"total_usd"`
	// PoolVolumes are the standing cost of each stopped Spot pool's
	// volumes (fleets with spot_pool), not in TotalUSD: a pool bills them
	// every hour, whatever the jobs.
	PoolVolumes []PoolVolumeCost `json:"pool_volumes,omitempty"`
}

// PoolVolumeCost is what a fleet's stopped Spot pool's volumes cost: size
// instances of volume_gb each at gp3's price (docs/scaling.md, "Cost per
// job").
type PoolVolumeCost struct {
	FleetSlug string `json:"fleet_slug"`
	Instances int    `json:"instances"`
	VolumeGB  int    `json:"volume_gb"`
	// USDPerDay is a day's; USD the window's, from Since to now.
	USDPerDay float64 `json:"usd_per_day"`
	USD       float64 `json:"usd"`
}

// CostGroup is the cost of one tenant's jobs of one workflow on one fleet.
type CostGroup struct {
	TenantID   string `json:"tenant_id"`
	FleetSlug  string `json:"fleet_slug"`
	WorkflowID string `json:"workflow_id"`
	// Jobs finished in the window; Unpriced of them have no cost (no
	// price known for their instance).
	Jobs     int     `json:"jobs"`
	Unpriced int     `json:"unpriced"`
	CostUSD  float64 `json:"cost_usd"`
}

// ConsoleSessionResponse is the 200 answer of POST /api/admin/console-session:
// the path (relative to the API's base URL) a browser opens to start an
// operator console session, usable until ExpiresAt.
type ConsoleSessionResponse struct {
	Path      string  `json:"path"`
	ExpiresAt *string `json:"expires_at"`
}

// ConsoleSessionsEnded is the 200 answer of DELETE
// /api/admin/console-session: every console session of the operator who
// asked has ended ("sign out everywhere").
type ConsoleSessionsEnded struct {
	Operator string `json:"operator"`
}
