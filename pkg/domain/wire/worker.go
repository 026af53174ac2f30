package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// RegisterRequest is the body of POST /api/worker/register.
type RegisterRequest struct {
	WorkerID  string `json:"worker_id"`
	FleetSlug string `json:"fleet_slug"`
	Stage     string `json:"stage"`
	// MaxConcurrency is how many jobs the worker runs at once (default 1).
	MaxConcurrency   *int   `json:"max_concurrency,omitempty"`
	InstanceID       string `json:"instance_id,omitempty"`
	InstanceType     string `json:"instance_type,omitempty"`
	AvailabilityZone string `json:"availability_zone,omitempty"`
	// PurchaseOption is how the instance is bought, "spot" or "on-demand"
	// (the agent reads instance-life-cycle from the instance metadata); it
	// prices the worker's jobs. Empty: unknown.
	PurchaseOption string          `json:"purchase_option,omitempty"`
	Capabilities   json.RawMessage `json:"capabilities,omitempty"`
	Providers      []string        `json:"providers,omitempty"`
	// AgentKey is a secret the agent keeps for the life of its installation
	// (16-256 characters): while the worker id's registration is live, a
	// registration with another key is refused (409 conflict), so two
	// agents never share an id; the same agent restarting registers again.
	AgentKey string `json:"agent_key,omitempty"`
	// AgentVersion is the agent's build (`fleetq version`). A version other
	// than the API's is accepted, logged and shown in the worker listing.
	AgentVersion string `json:"agent_version,omitempty"`
	// Boot is the instance's way to registration, from the agent's clock:
	// optional, each time RFC 3339.
	Boot *BootTimes `json:"boot,omitempty"`
}

// BootTimes are when the instance launched (or started from a warm pool:
// the instance identity document's pendingTime), the agent started, the
// runner answered ready, and the runner's warm-up ended (a fleet with a
// warm-up). Each is optional; given, they are in that order and not in the
// future.
type BootTimes struct {
	LaunchedAt     string `json:"launched_at,omitempty"`
	AgentStartedAt string `json:"agent_started_at,omitempty"`
	RunnerReadyAt  string `json:"runner_ready_at,omitempty"`
	WarmedUpAt     string `json:"warmed_up_at,omitempty"`
	// FromPool says LaunchedAt is the instance's start from a warm pool
	// (a bridge), not its launch.
	FromPool bool `json:"from_pool,omitempty"`
}

// AWSIdentity is a signed sts:GetCallerIdentity request, as the agent
// would send it to STS: never the credentials that signed it. Its headers
// must sign X-Fleetq-Server-Id (the stage) and X-Amz-Date. An attested
// registration carries it in the X-Fleetq-Identity header (EncodeIdentity),
// so the API knows the caller before it reads the body.
type AWSIdentity struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

// MaxIdentityHeader bounds the X-Fleetq-Identity header (an instance
// profile's signed request takes about 3 KB).
const MaxIdentityHeader = 8 << 10

// EncodeIdentity is the X-Fleetq-Identity header's value: the JSON of the
// signed request, base64url-encoded without padding.
func EncodeIdentity(id *AWSIdentity) string {
	b, _ := json.Marshal(id)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeIdentity reads an X-Fleetq-Identity header's value.
func DecodeIdentity(v string) (*AWSIdentity, error) {
	if len(v) > MaxIdentityHeader {
		return nil, fmt.Errorf("the %s header is longer than %d bytes", HeaderIdentity, MaxIdentityHeader)
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("the %s header is not base64url: %v", HeaderIdentity, err)
	}
	var id AWSIdentity
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&id); err != nil {
		return nil, fmt.Errorf("the %s header is not a signed request (method, url, headers, body): %v", HeaderIdentity, err)
	}
	return &id, nil
}

// RegisterResponse is the 201 answer of register. The token is shown only
// here (and in a rotate-token answer).
type RegisterResponse struct {
	WorkerID          string   `json:"worker_id"`
	Token             string   `json:"token"`
	WorkflowsAssigned []string `json:"workflows_assigned"`
	LeaseSeconds      int      `json:"lease_seconds"`
	HeartbeatSeconds  int      `json:"heartbeat_seconds"`
	PollSeconds       int      `json:"poll_seconds"`
	// Approved is false in fleets that require operator approval of new
	// workers: such a worker polls and gets no job until approved.
	Approved bool `json:"approved"`
}

// PollRequest is the body of POST /api/worker/poll (the body may be empty).
type PollRequest struct {
	// CurrentLoad is how many jobs the worker runs now.
	CurrentLoad *int `json:"current_load"`
}

// PollResponse is the 200 answer of poll; no job is 204 with no body.
type PollResponse struct {
	Job *LeasedJob `json:"job"`
}

// LeasedJob is a job as a worker leases it.
type LeasedJob struct {
	JobID      string `json:"job_id"`
	TenantID   string `json:"tenant_id"`
	WorkflowID string `json:"workflow_id"`
	Priority   int    `json:"priority"`
	// Attempt counts from 1.
	Attempt    int    `json:"attempt"`
	LeaseToken string `json:"lease_token"`
	// LeaseExpiresAt is RFC 3339 UTC with milliseconds.
	LeaseExpiresAt *string `json:"lease_expires_at"`
	// TimeoutSeconds is the attempt's run time limit (0: none).
	TimeoutSeconds int             `json:"timeout_seconds"`
	Input          json.RawMessage `json:"input"`
	// InputURLs are presigned GETs, one per name of the input's input_keys.
	InputURLs map[string]string `json:"input_urls"`
	// OutputURL is a presigned PUT for the job's output.
	OutputURL string `json:"output_url"`
	// OutputURLs has one presigned PUT per output the job's input names in
	// "outputs".
	OutputURLs map[string]string `json:"output_urls,omitempty"`
	// LogURL is a presigned PUT for the tail of the attempt's runner
	// output (absent without an asset bucket).
	LogURL string `json:"log_url,omitempty"`
}

// LeaseRef names a lease: the job and the token its lease was granted with.
type LeaseRef struct {
	JobID      string `json:"job_id"`
	LeaseToken string `json:"lease_token"`
}

// HeartbeatRequest is the body of POST /api/worker/heartbeat.
type HeartbeatRequest struct {
	LeaseRef
	// Progress is 0..1.
	Progress *float64 `json:"progress,omitempty"`
	// RefreshURLs asks for fresh presigned URLs, valid for the extended lease.
	RefreshURLs bool `json:"refresh_urls,omitempty"`
}

// HeartbeatResponse is the 200 answer of heartbeat.
type HeartbeatResponse struct {
	LeaseExpiresAt *string `json:"lease_expires_at"`
	// Cancel: an operator canceled the job; stop it and report nothing.
	Cancel bool `json:"cancel"`
	// LeaseURLs is present (its fields inline) when refresh_urls was asked,
	// the stage has an asset bucket and the job was not canceled.
	*LeaseURLs
}

// LeaseURLs are a leased job's presigned URLs as a heartbeat refreshes them.
type LeaseURLs struct {
	InputURLs  map[string]string `json:"input_urls"`
	OutputURL  string            `json:"output_url"`
	OutputURLs map[string]string `json:"output_urls,omitempty"`
	LogURL     string            `json:"log_url,omitempty"`
}

// UnhealthyRequest is the body of POST /api/worker/unhealthy: the worker's
// machine is sick and should be replaced.
type UnhealthyRequest struct {
	// Reason says what is wrong (required, at most 1024 characters), e.g.
	// "GPU 0 (00000000:00:1E.0): 4 uncorrectable ECC errors".
	Reason string `json:"reason"`
}

// BootProblemRunnerMissing is a boot report's problem when the machine
// cannot run its fleet's runner at all (the image lacks its program).
const BootProblemRunnerMissing = "runner_missing"

// BootReportRequest is the body of POST /api/worker/boot-report: an agent
// that will not register says why, for its own instance of its own fleet
// (proved as a registration is).
type BootReportRequest struct {
	WorkerID     string `json:"worker_id"`
	FleetSlug    string `json:"fleet_slug"`
	Stage        string `json:"stage"`
	InstanceID   string `json:"instance_id,omitempty"`
	InstanceType string `json:"instance_type,omitempty"`
	// ImageID is the machine's image (the AMI id in AWS), when known.
	ImageID string `json:"image_id,omitempty"`
	// Problem is BootProblemRunnerMissing.
	Problem string `json:"problem"`
	// Message says what is missing (at most 1024 characters).
	Message      string `json:"message"`
	AgentVersion string `json:"agent_version,omitempty"`
}

// CompleteRequest is the body of POST /api/worker/complete.
type CompleteRequest struct {
	LeaseRef
	// Result is a JSON object (optional).
	Result json.RawMessage `json:"result,omitempty"`
}

// FailRequest is the body of POST /api/worker/fail.
type FailRequest struct {
	LeaseRef
	Error *FailError `json:"error"`
}

// FailError is the failure a worker reports.
type FailError struct {
	// Message is required, at most 8192 characters.
	Message string `json:"message"`
	// Retryable defaults to true.
	Retryable *bool `json:"retryable"`
	// Code is the worker's own code, at most 128 characters.
	Code string `json:"code"`
}

// RequeueRequest is the body of POST /api/worker/requeue.
type RequeueRequest struct {
	LeaseRef
	// Reason is spot_interruption, rebalance, shutdown or scale_in.
	Reason string `json:"reason"`
}

// OutcomeResponse is the 200 answer of fail and requeue: what became of the
// job.
type OutcomeResponse struct {
	// Status is queued or dead.
	Status string `json:"status"`
	// NotBefore is set when the job waits out a backoff.
	NotBefore *string `json:"not_before,omitempty"`
}

// StatusResponse is the 200 answer of complete ("succeeded"), deregister
// ("deregistered") and cancel (the job's status).
type StatusResponse struct {
	Status string `json:"status"`
}

// Empty is the body of the routes that take none: {} or nothing.
type Empty struct{}
