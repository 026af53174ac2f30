package fleetstate

import (
	"time"

	"github.com/fleetq/fleetq/pkg/domain/lease"
)

// Queue is a fleet's live jobs one by one, read from the ready, delayed
// and leased partitions of the index: what a job's estimate projects
// forward. Its read costs what the tick's Snapshot costs, plus the
// delayed jobs' items (the tick only counts them).
type Queue struct {
	// Ready are the due queued jobs in queue order: highest priority,
	// then oldest.
	Ready []lease.Candidate
	// Delayed are the queued jobs waiting out a retry backoff, the soonest
	// due first.
	Delayed []Delayed
	// Leased are the jobs being processed.
	Leased []Running
}

// Delayed is a queued job waiting out its retry backoff until Due.
type Delayed struct {
	lease.Candidate
	Due time.Time
}

// Running is a leased job: whose it is, which worker runs it since when.
type Running struct {
	JobID, TenantID, WorkflowID, WorkerID string
	LeasedAt                              time.Time
}
