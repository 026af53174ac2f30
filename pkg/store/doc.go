// Package store keeps fleetq's state in one DynamoDB table: jobs with fenced
// leases, workers, per-fleet state and counters, registration rate windows and
// rejected submissions. Every state change is a conditional write (or a
// transaction of them); index reads only find candidates and never decide
// anything, because GSI reads are eventually consistent. The key design is
// written up in docs/data-model.md.
package store
