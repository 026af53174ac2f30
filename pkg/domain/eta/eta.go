package eta

import (
	"slices"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Code is what a queued job waits on: one of the constants below.
type Code string

// The codes, a closed set. Each names its Params.
const (
	// CodeLeasing: a free slot of a worker that serves the job can take it
	// now; it starts at the next poll. No params.
	CodeLeasing Code = "leasing"
	// CodeJobsAhead: the job waits for running jobs to end and for the
	// jobs ahead of it in lease order to take the slots that free first.
	// Params: ahead (jobs ahead in line), ready_at (when the slot it is
	// projected to take frees; absent when the start cannot be said).
	CodeJobsAhead Code = "jobs_ahead"
	// CodeCapacityBooting: the job waits for instances already launched
	// (or asked for) to boot and register. Params: instances (booting
	// now), ready_at (when the one it is projected to take is ready;
	// absent without a boot history).
	CodeCapacityBooting Code = "capacity_booting"
	// CodeScaleOutNextTick: no capacity on the way covers the job; the
	// scaler's next tick launches it. Params: at (the tick), launch (how
	// many instances that tick launches) and ready_at (a boot later), the
	// last two absent without a boot history.
	CodeScaleOutNextTick Code = "scale_out_next_tick"
	// CodeTenantAtCap: the job's tenant runs as many jobs as its max_leased
	// allows; one of them must end first. Params: tenant, max_leased,
	// leased.
	CodeTenantAtCap Code = "tenant_at_cap"
	// CodeFleetAtMax: the fleet is at its max_instances and every slot is
	// taken; a running job must end first. Params: max, ready_at (when the
	// slot it is projected to take frees, absent when unknown).
	CodeFleetAtMax Code = "fleet_at_max"
	// CodeSpotUnavailable: the capacity the job needs is refused by Spot
	// (no Spot capacity for the type in the zone). Params: since, type and
	// zone (when known), next_rung ("on-demand", absent without an On-Demand rung),
	// rung_at (when launches move to it, absent without one).
	CodeSpotUnavailable Code = "spot_unavailable"
	// CodeBackoff: the job waits out a retry backoff before it may be
	// leased again. Params: until.
	CodeBackoff Code = "backoff"
	// CodeWorkerApproval: the capacity that would run the job is workers
	// registered and awaiting an operator's approval. Params: pending (how
	// many workers await it).
	CodeWorkerApproval Code = "worker_approval"
	// CodeQueueDeadlineNear: the job's queue timeout runs out before it is
	// projected to start (or before whatever it waits on can be timed): it
	// is likely to end unleased. Params: at (the deadline).
	CodeQueueDeadlineNear Code = "queue_deadline_near"
)

// Codes are every Code.
var Codes = []Code{CodeLeasing, CodeJobsAhead, CodeCapacityBooting, CodeScaleOutNextTick, CodeTenantAtCap,
	CodeFleetAtMax, CodeSpotUnavailable, CodeBackoff, CodeWorkerApproval, CodeQueueDeadlineNear}

// Valid reports whether c is one of the codes.
func (c Code) Valid() bool { return slices.Contains(Codes, c) }

// Param names of WaitingOn.Params. Times are RFC 3339 in UTC, counts and
// caps decimal integers.
const (
	ParamAhead     = "ahead"
	ParamReadyAt   = "ready_at"
	ParamInstances = "instances"
	ParamAt        = "at"
	ParamLaunch    = "launch"
	ParamTenant    = "tenant"
	ParamMaxLeased = "max_leased"
	ParamLeased    = "leased"
	ParamMax       = "max"
	ParamType      = "type"
	ParamZone      = "zone"
	ParamSince     = "since"
	ParamNextRung  = "next_rung"
	ParamRungAt    = "rung_at"
	ParamUntil     = "until"
	ParamPending   = "pending"
)

// WaitingOn is the one thing a queued job waits on.
type WaitingOn struct {
	Code Code `json:"code"`
	// Params are the code's values (see each Code), by Param name.
	Params map[string]string `json:"params,omitempty"`
	// Text is one line a person reads ("3 jobs ahead; a slot frees at
	// 14:05 UTC").
	Text string `json:"text"`
}

// Basis says how an estimate was made, or why it could not be.
type Basis string

// The bases.
const (
	// BasisProjection: StartAt is the projection's, from the fleet's run
	// and boot history and the scaler's rules.
	BasisProjection Basis = "projection"
	// BasisNoHistory: the start depends on a duration the fleet has no
	// history of yet (no instance has booted, or a job of a workflow with
	// no completed run holds the slot); StartAt is zero.
	BasisNoHistory Basis = "no_history"
	// BasisAtMaxUnknownRunTimes: the fleet (or the tenant) is at its cap
	// and the slot frees only when running jobs end whose workflows have
	// no run-time history; StartAt is zero.
	BasisAtMaxUnknownRunTimes Basis = "at_max_unknown_run_times"
	// BasisAwaitingApproval: the capacity is workers awaiting an
	// operator's approval, which no rule can time; StartAt is zero.
	BasisAwaitingApproval Basis = "awaiting_approval"
	// BasisSpotShort: the capacity is refused by Spot and the fleet has no
	// On-Demand rung to move to; when Spot returns cannot be said; StartAt
	// is zero.
	BasisSpotShort Basis = "spot_short"
	// BasisQueueTimeout: the job's queue timeout runs out before the
	// projection reaches its start: it is expected to end unleased; StartAt
	// is zero.
	BasisQueueTimeout Basis = "queue_timeout"
	// BasisBeyondHorizon: the job does not start within the projection's
	// horizon (Horizon), or it is further back in line than the jobs the
	// projection follows (MaxProjected; its Position is still told when
	// known); StartAt is zero.
	BasisBeyondHorizon Basis = "beyond_horizon"
)

// Estimate is one queued job's projected start.
type Estimate struct {
	JobID string
	// StartAt is when the job is expected to be leased; zero when it cannot
	// be said (Basis says why). Never before the projection's now.
	StartAt   time.Time
	Basis     Basis
	WaitingOn WaitingOn
	// Position is the job's place in the fleet's lease order now, from 1.
	Position int
}

// Known reports whether the estimate has a start time.
func (e Estimate) Known() bool { return !e.StartAt.IsZero() }

// Queued is a queued job: ready, or waiting out a retry backoff.
type Queued struct {
	// Candidate is the job as the ready queue shows it (id, tenant,
	// workflow, priority, created, pinned to On-Demand, queue deadline).
	lease.Candidate
	// NotBefore is when a job waiting out a retry backoff may be leased
	// again (zero: ready now).
	NotBefore time.Time
}

// Running is a leased job.
type Running struct {
	JobID, TenantID, WorkflowID string
	// WorkerID holds the lease.
	WorkerID string
	// LeasedAt is when this attempt was leased.
	LeasedAt time.Time
	// OnDemandOnly: only On-Demand workers may lease it again.
	OnDemandOnly bool
}

// Worker is a registered worker.
type Worker struct {
	// Worker is the worker as the scaling policy sees it (id, instance,
	// leases, last seen, idle since; draining when its status is not
	// active), as the scaler's tick builds it.
	scaling.Worker
	// Workflows it serves (nil: every workflow of the queue).
	Workflows []string
	// OnDemand: its instance is On-Demand.
	OnDemand bool
	// Pending: it awaits an operator's approval (not approved) and leases
	// nothing until then.
	Pending bool
}

// Spot is the fleet's Spot group beside an On-Demand one (the ladder:
// scaling.DecideLadder).
type Spot struct {
	// ShortSince is when the Spot group's launches began failing for lack
	// of capacity (zero: they do not).
	ShortSince time.Time
	// InstanceType and AZ are the type and zone Spot last refused (empty
	// when unknown).
	InstanceType, AZ string
	// After is how long Spot may be short before launches move to
	// On-Demand (zero: no On-Demand rung); WaitSLO moves them sooner
	// (scaling.LadderInput).
	After, WaitSLO time.Duration
	// OnDemand names the instances of the On-Demand group.
	OnDemand map[string]bool
	// SpotDesired and OnDemandDesired are each group's desired capacity.
	SpotDesired, OnDemandDesired int
}

// History is recent durations of one kind: boots, or one workflow's run
// times. Nil: none known.
type History []time.Duration

// Snapshot is everything a projection reads of one fleet at one moment.
type Snapshot struct {
	// Settings are the fleet's scaling settings (scaling.SettingsOf).
	Settings scaling.Settings
	// Queued are the fleet's queued jobs, in any order: all of them, or
	// the head of its queue in queue order (ready jobs by priority then
	// age, then those waiting out a backoff by when they are due), with
	// Beyond counting the queued jobs left out, as far as known: the
	// scaler's ticks count them as ready work. A projection follows at most
	// MaxProjected of them.
	Queued []Queued
	Beyond int
	// Running are its leased jobs.
	Running []Running
	// Instances are the group's live instances (both groups' with Spot),
	// each with FirstSeen; Desired is the group's desired capacity (the
	// Spot group's and the On-Demand group's summed with Spot). A fleet
	// with no group (workers started by hand) has none: each machine a
	// worker registered from is then an instance in service, as the
	// scaler counts it.
	Instances []scaling.Instance
	Desired   int
	// Workers are the fleet's registered workers.
	Workers []Worker
	// LastActiveAt is the scaler's idle clock (fleetstate.State).
	LastActiveAt time.Time
	// NextTick is when the scaler decides next (zero or past: now);
	// Interval is the time between its ticks (zero: a minute).
	NextTick time.Time
	Interval time.Duration
	// Boot are the fleet's recent boots, launch to registered (Boots).
	Boot History
	// RunTimes are each workflow's recent run times (succeeded attempts);
	// under "" the fleet's of any workflow, for a workflow with none of its
	// own (fleetstate.Outcomes.Runs).
	RunTimes map[string]History
	// Tenants answers a tenant's settings (weight, max_leased); nil when the
	// stage lists no tenants (no fair share, no caps).
	Tenants func(id string) fleetconfig.Tenant
	// Spot is the fleet's Spot shortage and On-Demand rung; nil for a
	// fleet of one group whose launches do not fail (one whose Spot
	// launches fail for lack of capacity sets ShortSince, After zero).
	Spot *Spot
}
