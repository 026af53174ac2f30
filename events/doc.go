// Package events holds sample events for every fleetq function, as the AWS
// service delivers them: API Gateway HTTP API (payload v2) requests, an SQS
// batch, the scheduler tick, and the EC2 and Auto Scaling events. Tests read
// them through FS; people can replay them by hand (POST /local/events in the
// dev stack, or `sam local invoke -e`).
package events

import "embed"

// FS holds every sample (*.json).
//
//go:embed *.json
var FS embed.FS
