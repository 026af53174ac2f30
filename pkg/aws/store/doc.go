// Package store keeps fleetq's state in one DynamoDB table: jobs with fenced
// leases, workers, per-fleet state and counters, registration rate windows and
// rejected submissions. Every state change is a conditional write (or a
// transaction of them); index reads only find candidates and never decide
// anything, because GSI reads are eventually consistent. The key design is
// written up in docs/data-model.md.
//
// The package is the DynamoDB adapter; the records it returns are defined
// where they mean something: jobs in pkg/domain/job, workers in pkg/domain/worker, fleet
// state, decisions and interruption counts in pkg/domain/fleetstate. Its files
// follow the aggregates: jobs.go, lease.go, report.go and deadlines.go (jobs
// and their leases), workers.go, fleetstate.go, registration.go,
// interruptions.go and outbox.go, over store.go (the client, writes,
// transactions and the one query helper) and schema.go (every key, prefix
// and attribute name).
package store
