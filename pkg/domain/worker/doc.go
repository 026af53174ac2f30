// Package worker defines a registered worker as the rest of fleetq sees it:
// its identity, fleet, instance, status and lease count. The record is
// shared by the HTTP API, the scaler, the interruption handler and the CLI,
// so it lives apart from the DynamoDB adapter (pkg/aws/store) that persists it.
package worker
