package job

import "time"

// HeartbeatResult answers a heartbeat on a job's lease.
type HeartbeatResult struct {
	LeaseExpiresAt time.Time
	// Cancel asks the worker to stop: an operator canceled the job.
	Cancel bool
}
