package store

import (
	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/job"
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
type (
	HeartbeatResult = job.HeartbeatResult
	SweepResult     = job.SweepResult
)
