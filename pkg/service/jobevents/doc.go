// Package jobevents delivers the job lifecycle events the store's outbox
// holds: to an EventBridge bus in AWS (source "fleetq"), or to an in-process
// bus in the dev stack, which keeps the most recent ones for
// GET /local/events/recent.
package jobevents
