package store

import "errors"

// Sentinel errors for the protocol's cases; the HTTP API maps them to status
// codes in one place.
var (
	// ErrNotFound: no such job, worker or fleet.
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost: the lease token is not the job's current lease.
	ErrLeaseLost = errors.New("lease lost")
	// ErrNoJob: nothing this worker may lease right now.
	ErrNoJob = errors.New("no job available")
	// ErrUnauthenticated: the worker token is unknown or replaced.
	ErrUnauthenticated = errors.New("worker token not recognized")
	// ErrRevoked: the worker was revoked by an operator.
	ErrRevoked = errors.New("worker revoked")
	// ErrFleetFull: the fleet is at its worker cap.
	ErrFleetFull = errors.New("fleet is at its worker cap")
	// ErrConflict: the request does not fit the current state.
	ErrConflict = errors.New("conflict")
	// ErrRateLimited: too many registrations from one source.
	ErrRateLimited = errors.New("rate limited")
	// ErrContention: a write raced another and was not applied; safe to retry.
	ErrContention = errors.New("write contention, retry")
)
