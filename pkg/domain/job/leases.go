package job

import "time"

// HeartbeatResult answers a heartbeat on a job's lease.
type HeartbeatResult struct {
	LeaseExpiresAt time.Time
	// Cancel asks the worker to stop: an operator canceled the job.
	Cancel bool
}

// SweepResult counts what a sweep of a fleet's run-out leases did: jobs
// queued again, and jobs dead with no attempt left.
type SweepResult struct {
	Requeued int
	Dead     int
}
