// Package worker defines a registered worker as the rest of fleetq sees it:
// its identity, fleet, instance, status and lease count; what a worker's
// token proves (Auth), a worker's registration, and an instance's
// termination held while its workers drain. The records are shared by the
// HTTP API, the scaler, the interruption handler and the CLI, so they live
// apart from the DynamoDB adapter (pkg/aws/store) that persists them.
package worker
