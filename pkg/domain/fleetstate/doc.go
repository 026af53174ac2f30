// Package fleetstate defines what fleetq knows about a fleet besides its jobs
// and workers: its live backlog, recent outcomes, scaling decisions and their
// history, and counted interruptions. The scaler, the HTTP API and the
// interruption handler exchange these records with the DynamoDB adapter
// (pkg/aws/store), which persists them but does not own their meaning.
package fleetstate
