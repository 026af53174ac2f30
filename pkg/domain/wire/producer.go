package wire

import "encoding/json"

// SubmitRequest is the body of POST /api/jobs, and the message on the
// submission queue.
type SubmitRequest struct {
	// JobID is assigned when empty; resubmitting with the same id yields one job.
	JobID      string          `json:"job_id,omitempty"`
	TenantID   string          `json:"tenant_id"`
	WorkflowID string          `json:"workflow_id"`
	Priority   int             `json:"priority"`
	Input      json.RawMessage `json:"input,omitempty"`
	// MaxAttempts, TimeoutSeconds and QueueTimeoutSeconds override the
	// fleet's defaults (0: the default).
	MaxAttempts         int `json:"max_attempts,omitempty"`
	TimeoutSeconds      int `json:"timeout_seconds,omitempty"`
	QueueTimeoutSeconds int `json:"queue_timeout_seconds,omitempty"`
	// CallbackURL receives each of the job's outcomes, signed; its host
	// must be among the stage's webhooks.allowed_hosts.
	CallbackURL string `json:"callback_url,omitempty"`
}

// JobStatusResponse is the answer of submit (202, status "accepted") and of
// an operator's retry (200, the job's new status).
type JobStatusResponse struct {
	JobID  string `json:"job_id"`
	Status string `json:"status"`
}

// Job is the 200 answer of GET /api/jobs/{job_id}. Times are RFC 3339 UTC
// with milliseconds, null when unset.
type Job struct {
	JobID      string `json:"job_id"`
	TenantID   string `json:"tenant_id"`
	WorkflowID string `json:"workflow_id"`
	FleetSlug  string `json:"fleet_slug"`
	// Status is queued, leased, succeeded, dead or canceled.
	Status string `json:"status"`
	// Reason says why the job is in its status.
	Reason      string `json:"reason,omitempty"`
	Attempts    int    `json:"attempts"`
	MaxAttempts int    `json:"max_attempts"`
	Preemptions int    `json:"preemptions"`
	// OnDemandOnly is true when only On-Demand workers may lease the job (it
	// reached its preemption cap in a fleet with an On-Demand rung).
	OnDemandOnly bool    `json:"on_demand_only,omitempty"`
	Priority     int     `json:"priority"`
	CreatedAt    *string `json:"created_at"`
	UpdatedAt    *string `json:"updated_at"`
	// NotBefore is set while a retry waits out its backoff.
	NotBefore *string `json:"not_before,omitempty"`
	// LeaseExpiresAt, WorkerID and Progress are set while leased.
	LeaseExpiresAt *string  `json:"lease_expires_at"`
	WorkerID       *string  `json:"worker_id"`
	Progress       *float64 `json:"progress,omitempty"`
	// Result is the worker's result object, or null.
	Result  json.RawMessage `json:"result"`
	Error   *JobError       `json:"error"`
	History []JobTransition `json:"history"`
	// CostUSD is the finished job's cost in dollars (docs/scaling.md, "Cost
	// per job"); null until its outcome is relayed, or when it could not be
	// priced.
	CostUSD *float64 `json:"cost_usd"`
	// Callback is the delivery of the latest outcome to the job's
	// callback_url; absent for a job without one.
	Callback *JobCallback `json:"callback,omitempty"`
	// EstimatedStartAt, EstimateBasis, WaitingOn and Position are a queued
	// job's estimate (docs/api.md, "When will my job start"): when it is
	// expected to be leased (absent when the estimate cannot say), how the
	// estimate was made, the one thing it waits on, and its place in its
	// fleet's lease order (1: next). All are absent for a job not queued.
	EstimatedStartAt *string    `json:"estimated_start_at,omitempty"`
	EstimateBasis    string     `json:"estimate_basis,omitempty"`
	WaitingOn        *WaitingOn `json:"waiting_on,omitempty"`
	Position         int        `json:"position,omitempty"`
}

// WaitingOn is the one thing a queued job waits on: a code from a closed
// set that programs match on, its parameters (each a string: a count, a
// time in RFC 3339, an instance type ...), and one line a person reads.
type WaitingOn struct {
	Code   string            `json:"code"`
	Params map[string]string `json:"params,omitempty"`
	Text   string            `json:"text"`
}

// JobCallback is a job's callback_url and how the delivery of its latest
// outcome went. The URL is shown without its query and user info.
type JobCallback struct {
	URL string `json:"url"`
	// State is waiting (no outcome yet), pending, delivered or failed.
	State         string  `json:"state"`
	EventID       string  `json:"event_id,omitempty"`
	Attempts      int     `json:"attempts"`
	DeliveredAt   *string `json:"delivered_at,omitempty"`
	FailedAt      *string `json:"failed_at,omitempty"`
	NextAttemptAt *string `json:"next_attempt_at,omitempty"`
	LastError     string  `json:"last_error,omitempty"`
}

// JobError is a job's last failure.
type JobError struct {
	Code      string `json:"code,omitempty"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// JobTransition is one entry of a job's history.
type JobTransition struct {
	At      *string `json:"at"`
	From    string  `json:"from,omitempty"`
	To      string  `json:"to"`
	Reason  string  `json:"reason,omitempty"`
	Worker  string  `json:"worker_id,omitempty"`
	Attempt int     `json:"attempt,omitempty"`
}

// UploadRequest is the body of POST /api/uploads.
type UploadRequest struct {
	TenantID string `json:"tenant_id"`
	// Filename is one key segment: letters, digits, '.', '_', '-'.
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
}

// UploadResponse is the 200 answer of upload: PUT the file to URL before
// ExpiresAt and name Key in the job's input_keys.
type UploadResponse struct {
	Key       string  `json:"key"`
	URL       string  `json:"url"`
	ExpiresAt *string `json:"expires_at"`
}

// JobLogsResponse is the 200 answer of GET /api/jobs/{job_id}/logs: a
// presigned GET of each run's log, first run first.
type JobLogsResponse struct {
	JobID string   `json:"job_id"`
	Logs  []JobLog `json:"logs"`
}

// JobLog is one run's log. Attempt is the run's number (jobinput.Runs):
// a run that a preemption gave back has its own, so for a job never
// preempted it is the attempt's.
type JobLog struct {
	Attempt   int     `json:"attempt"`
	URL       string  `json:"url"`
	ExpiresAt *string `json:"expires_at"`
}
