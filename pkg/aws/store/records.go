package store

import (
	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/jobevent"
	"github.com/fleetq/fleetq/pkg/domain/submission"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// The store's records and errors are defined in the domain, where the
// services that use them find them without importing this adapter; these
// names keep the store's own code and its tests reading as before.

// Sentinel errors (pkg/domain/fault).
var (
	ErrNotFound        = fault.ErrNotFound
	ErrLeaseLost       = fault.ErrLeaseLost
	ErrNoJob           = fault.ErrNoJob
	ErrUnauthenticated = fault.ErrUnauthenticated
	ErrRevoked         = fault.ErrRevoked
	ErrFleetFull       = fault.ErrFleetFull
	ErrConflict        = fault.ErrConflict
	ErrRateLimited     = fault.ErrRateLimited
	ErrContention      = fault.ErrContention
	ErrItemTooLarge    = fault.ErrItemTooLarge
	ErrLoginUsed       = fault.ErrLoginUsed
)

// Workers (pkg/domain/worker).
type (
	WorkerAuth   = worker.Auth
	Registration = worker.Registration
	Termination  = worker.Termination
)

// Leases (pkg/domain/job).
type HeartbeatResult = job.HeartbeatResult

// Tenants' API keys, principals and caps (pkg/domain/tenant).
type (
	APIKey               = tenant.APIKey
	Principal            = tenant.PrincipalMapping
	PrincipalMappedError = tenant.PrincipalMappedError
	QuotaError           = tenant.QuotaError
)

// The states of an API key, and how stale its last use may get.
const (
	KeyActive        = tenant.KeyActive
	KeyRevoked       = tenant.KeyRevoked
	KeyExpired       = tenant.KeyExpired
	KeyTouchInterval = tenant.KeyTouchInterval
)

// Errors of tenants' records (pkg/domain/tenant).
var (
	ErrPrincipalMapped = tenant.ErrPrincipalMapped
	ErrOverQuota       = tenant.ErrOverQuota
)

// A rejected submission (pkg/domain/submission) and the cost of a group of
// jobs (pkg/domain/cost), as operators read them.
type (
	Rejection = submission.Rejection
	CostGroup = cost.Group
)

// Job events and callbacks (pkg/domain/jobevent).
type (
	JobEvent       = jobevent.Event
	JobEventDetail = jobevent.Detail
	Publisher      = jobevent.Publisher
	Callback       = jobevent.Callback
	CallbackResult = jobevent.CallbackResult
)

// Job lifecycle events (EventBridge detail-types).
const (
	EventSucceeded = jobevent.Succeeded
	EventFailed    = jobevent.Failed
	EventDead      = jobevent.Dead
	EventCanceled  = jobevent.Canceled
)
