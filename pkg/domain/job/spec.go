package job

import "encoding/json"

// Spec is what a submission asks for: the job to create, with zeros where
// the fleet's policy decides.
type Spec struct {
	ID                  string
	TenantID            string
	WorkflowID          string
	Priority            int
	Input               json.RawMessage
	MaxAttempts         int // 0: the fleet's retry policy
	TimeoutSeconds      int // 0: the fleet's job timeout
	QueueTimeoutSeconds int // 0: the fleet's queue timeout (none when that is 0)
	// CallbackURL receives the job's outcomes ("" for none).
	CallbackURL string
	// Accepted: the submission came through the API, which wrote the job
	// as accepted before queuing it, so filing that record is tried first
	// (a hint of cost only: a submission without one is created anyway).
	Accepted bool
}
