// Package fault names the cases a state change is refused for: no such
// record, a lease that is no longer the caller's, a worker token that is
// replaced or revoked, a fleet at its cap, a write that raced another. The
// store (pkg/aws/store) answers them, wrapped with what was refused; the
// services test for them with errors.Is, and the HTTP API maps each to its
// status and code in one place (pkg/service/api, errors.go). They live in
// the domain so that a service needs no import of the DynamoDB adapter to
// tell them apart.
package fault

import "errors"

// Sentinel errors for the protocol's cases.
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
	// ErrItemTooLarge: a write DynamoDB refused because the item would
	// pass its 400 KB limit. Retrying cannot help; the API's size budgets
	// (pkg/domain/submission) keep every accepted job under it.
	ErrItemTooLarge = errors.New("item over DynamoDB's 400 KB limit")
	// ErrLoginUsed: an operator console login nonce that was used before.
	ErrLoginUsed = errors.New("console login already used")
)
