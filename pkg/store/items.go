package store

import (
	"encoding/json"

	"github.com/fleetq/fleetq/pkg/job"
)

// jobItem is a job as stored. Times are Unix milliseconds so conditions can
// compare them as numbers; input and result are kept as JSON text so they
// come back byte for byte.
type jobItem struct {
	PK     string `dynamodbav:"PK"`
	SK     string `dynamodbav:"SK"`
	GSI1PK string `dynamodbav:"GSI1PK"`
	GSI1SK string `dynamodbav:"GSI1SK"`
	Type   string `dynamodbav:"type"`

	JobID      string `dynamodbav:"job_id"`
	TenantID   string `dynamodbav:"tenant_id"`
	WorkflowID string `dynamodbav:"workflow_id"`
	Fleet      string `dynamodbav:"fleet"`
	Status     string `dynamodbav:"status"`
	Priority   int    `dynamodbav:"priority"`

	Attempts       int `dynamodbav:"attempts"`
	MaxAttempts    int `dynamodbav:"max_attempts"`
	Preemptions    int `dynamodbav:"preemptions"`
	MaxPreemptions int `dynamodbav:"max_preemptions"`
	TimeoutS       int `dynamodbav:"timeout_s"`
	QueueTimeoutS  int `dynamodbav:"queue_timeout_s"`

	Input     string     `dynamodbav:"input,omitempty"`
	Result    string     `dynamodbav:"result,omitempty"`
	Error     *job.Error `dynamodbav:"error,omitempty"`
	ErrorCode string     `dynamodbav:"error_code,omitempty"`

	CreatedMS      int64 `dynamodbav:"created_ms"`
	UpdatedMS      int64 `dynamodbav:"updated_ms"`
	NotBeforeMS    int64 `dynamodbav:"not_before_ms"`
	FirstLeasedMS  int64 `dynamodbav:"first_leased_ms,omitempty"`
	LeasedMS       int64 `dynamodbav:"leased_ms,omitempty"`
	LeaseExpiresMS int64 `dynamodbav:"lease_expires_ms,omitempty"`
	// QueueDeadlineMS is when a never-leased job expires (0: never; cleared
	// by the first lease). RunDeadlineMS is when the current attempt must
	// end (0: no limit).
	QueueDeadlineMS int64 `dynamodbav:"queue_deadline_ms"`
	RunDeadlineMS   int64 `dynamodbav:"run_deadline_ms"`

	LeaseToken      string   `dynamodbav:"lease_token,omitempty"`
	WorkerID        string   `dynamodbav:"worker_id,omitempty"`
	Progress        *float64 `dynamodbav:"progress,omitempty"`
	Reason          string   `dynamodbav:"reason,omitempty"`
	CancelRequested bool     `dynamodbav:"cancel_requested,omitempty"`

	History []job.HistoryEntry `dynamodbav:"history"`
	TTL     int64              `dynamodbav:"ttl,omitempty"`
}

func (it *jobItem) toJob() job.Job {
	j := job.Job{
		ID:                  it.JobID,
		TenantID:            it.TenantID,
		WorkflowID:          it.WorkflowID,
		FleetSlug:           it.Fleet,
		Status:              job.Status(it.Status),
		Priority:            it.Priority,
		Attempts:            it.Attempts,
		MaxAttempts:         it.MaxAttempts,
		Preemptions:         it.Preemptions,
		MaxPreemptions:      it.MaxPreemptions,
		TimeoutSeconds:      it.TimeoutS,
		QueueTimeoutSeconds: it.QueueTimeoutS,
		Error:               it.Error,
		CreatedAt:           fromMS(it.CreatedMS),
		UpdatedAt:           fromMS(it.UpdatedMS),
		NotBefore:           fromMS(it.NotBeforeMS),
		FirstLeasedAt:       fromMS(it.FirstLeasedMS),
		LeasedAt:            fromMS(it.LeasedMS),
		LeaseExpiresAt:      fromMS(it.LeaseExpiresMS),
		LeaseToken:          it.LeaseToken,
		WorkerID:            it.WorkerID,
		Progress:            it.Progress,
		Reason:              it.Reason,
		CancelRequested:     it.CancelRequested,
		History:             it.History,
	}
	if it.Input != "" {
		j.Input = json.RawMessage(it.Input)
	}
	if it.Result != "" {
		j.Result = json.RawMessage(it.Result)
	}
	return j
}

// workerItem is a registered worker as stored.
type workerItem struct {
	PK     string `dynamodbav:"PK"`
	SK     string `dynamodbav:"SK"`
	GSI1PK string `dynamodbav:"GSI1PK"`
	GSI1SK string `dynamodbav:"GSI1SK"`
	GSI2PK string `dynamodbav:"GSI2PK,omitempty"`
	GSI2SK string `dynamodbav:"GSI2SK,omitempty"`
	Type   string `dynamodbav:"type"`

	WorkerID       string   `dynamodbav:"worker_id"`
	Fleet          string   `dynamodbav:"fleet"`
	Stage          string   `dynamodbav:"stage"`
	InstanceID     string   `dynamodbav:"instance_id,omitempty"`
	InstanceType   string   `dynamodbav:"instance_type,omitempty"`
	AZ             string   `dynamodbav:"az,omitempty"`
	Capabilities   string   `dynamodbav:"capabilities,omitempty"`
	Providers      []string `dynamodbav:"providers,omitempty"`
	MaxConcurrency int      `dynamodbav:"max_concurrency"`
	TokenHash      string   `dynamodbav:"token_hash"`
	Status         string   `dynamodbav:"wstatus"`
	Approved       bool     `dynamodbav:"approved"`
	Leases         int      `dynamodbav:"leases"`
	RegisteredMS   int64    `dynamodbav:"registered_ms"`
	LastSeenMS     int64    `dynamodbav:"last_seen_ms"`
	LastReleaseMS  int64    `dynamodbav:"last_release_ms,omitempty"`
	LastClaimMS    int64    `dynamodbav:"last_claim_ms,omitempty"`
	SourceIP       string   `dynamodbav:"source_ip,omitempty"`
}

func (it *workerItem) toWorker() Worker {
	w := Worker{
		ID:             it.WorkerID,
		Fleet:          it.Fleet,
		Stage:          it.Stage,
		InstanceID:     it.InstanceID,
		InstanceType:   it.InstanceType,
		AZ:             it.AZ,
		Providers:      it.Providers,
		MaxConcurrency: it.MaxConcurrency,
		TokenHash:      it.TokenHash,
		Status:         WorkerStatus(it.Status),
		Approved:       it.Approved,
		Leases:         it.Leases,
		RegisteredAt:   fromMS(it.RegisteredMS),
		LastSeenAt:     fromMS(it.LastSeenMS),
		LastReleaseAt:  fromMS(it.LastReleaseMS),
		LastClaimAt:    fromMS(it.LastClaimMS),
		SourceIP:       it.SourceIP,
	}
	if it.Capabilities != "" {
		w.Capabilities = json.RawMessage(it.Capabilities)
	}
	return w
}
