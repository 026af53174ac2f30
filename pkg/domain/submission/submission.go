package submission

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/jobinput"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/strictjson"
)

// Submission is a job as a producer submits it: the body of POST /api/jobs
// and the message on the submission queue, whose fields pkg/domain/wire defines.
type Submission wire.SubmitRequest

// MaxBodyBytes bounds a submission (and every request body).
const MaxBodyBytes = 256 << 10

// A job's input and its result live on one DynamoDB item, which may hold at
// most 400 KB (409,600 bytes) with its history, error and bookkeeping. The
// budget is split up front so that every accepted job can always be
// completed: an input is refused at submit past MaxInputBytes, a result at
// complete past MaxResultBytes, and what is left, at least ItemReserveBytes,
// holds the rest (at most 22 history entries, an error of up to 8 KiB,
// ids, counters, index keys, a callback URL of up to 2 KiB and its
// delivery state: about 20 KB at their largest). The store's
// tests check a job with every field at its largest against the limit.
const (
	MaxInputBytes    = 192 << 10
	MaxResultBytes   = 160 << 10
	ItemReserveBytes = 400*1024 - MaxInputBytes - MaxResultBytes
)

// Limits of a submission's numbers.
const (
	MaxTimeoutSeconds = 7 * 24 * 3600
)

// IDPattern is what a submission's job key (the producer's key for the
// job, unique within its tenant) and a worker id may look like. Tenant ids
// are stricter (tenant.ValidID).
var IDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// key is the submission's job key: its job_id, less the tenant and the
// separator when the job_id is the job's full id (tenant.JobID), as the
// API puts it on the queue. A full id is at most tenant.MaxJobIDLength.
func (s *Submission) key() string {
	if tenant.ValidID(s.TenantID) {
		if k, ok := strings.CutPrefix(s.JobID, s.TenantID+tenant.JobSeparator); ok {
			return k
		}
	}
	return s.JobID
}

// Error is a submission that can never be accepted; its message is safe to
// show the producer. TooLarge marks a size over its budget (HTTP 413).
type Error struct {
	Msg      string
	TooLarge bool
}

// Error implements error.
func (e *Error) Error() string { return e.Msg }

func invalid(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Parse decodes a submission strictly and validates it against the fleet
// config. The job id may be missing; the caller assigns one.
func Parse(data []byte, cfg *fleetconfig.Config) (Submission, error) {
	s, err := Decode(data)
	if err != nil {
		return Submission{}, err
	}
	return s, s.Validate(cfg)
}

// Decode decodes a submission strictly without validating it: the API
// fills in the caller's tenant before Validate.
func Decode(data []byte) (Submission, error) {
	if len(data) > MaxBodyBytes {
		return Submission{}, &Error{Msg: fmt.Sprintf("the submission is %d bytes; at most %d are allowed", len(data), MaxBodyBytes), TooLarge: true}
	}
	var s Submission
	if err := strictjson.Decode(data, &s, false); err != nil {
		return Submission{}, &Error{Msg: err.Error()}
	}
	return s, nil
}

// Validate checks every field; it is also run on submissions built in code.
func (s *Submission) Validate(cfg *fleetconfig.Config) error {
	if s.JobID != "" && !IDPattern.MatchString(s.key()) {
		return invalid("field \"job_id\": %q must be 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit (after the tenant and ':' when it is the job's full id)", s.JobID)
	}
	if err := tenant.CheckID("tenant_id", s.TenantID); err != nil {
		return &Error{Msg: err.Error()}
	}
	if s.WorkflowID == "" {
		return invalid("field \"workflow_id\" is required")
	}
	if _, ok := cfg.FleetForWorkflow(s.WorkflowID); !ok {
		return invalid("field \"workflow_id\": no fleet of stage %s serves workflow %q", cfg.Stage, s.WorkflowID)
	}
	if s.Priority < job.MinPriority || s.Priority > job.MaxPriority {
		return invalid("field \"priority\": must be between %d and %d, got %d", job.MinPriority, job.MaxPriority, s.Priority)
	}
	obj, err := strictjson.RequireObject("input", s.Input)
	if err != nil {
		return &Error{Msg: err.Error()}
	}
	s.Input = obj
	if len(s.Input) > MaxInputBytes {
		return &Error{Msg: fmt.Sprintf("field \"input\": %d bytes; at most %d are allowed, so that the job and its result fit in one record (store larger inputs as uploaded objects)", len(s.Input), MaxInputBytes), TooLarge: true}
	}
	if d := depth(s.Input); d > MaxInputDepth {
		return invalid("field \"input\": nested %d levels deep; at most %d levels of objects and arrays are allowed (DynamoDB's limit for a document)", d, MaxInputDepth)
	}
	if _, err := jobinput.ParseRefs(s.TenantID, s.Input); err != nil {
		return &Error{Msg: err.Error()}
	}
	if s.MaxAttempts < 0 || s.MaxAttempts > fleetconfig.MaxAttemptsLimit {
		return invalid("field \"max_attempts\": must be between 1 and %d, got %d", fleetconfig.MaxAttemptsLimit, s.MaxAttempts)
	}
	if s.TimeoutSeconds < 0 || s.TimeoutSeconds > MaxTimeoutSeconds {
		return invalid("field \"timeout_seconds\": must be between 1 and %d, got %d", MaxTimeoutSeconds, s.TimeoutSeconds)
	}
	if s.QueueTimeoutSeconds < 0 || s.QueueTimeoutSeconds > MaxTimeoutSeconds {
		return invalid("field \"queue_timeout_seconds\": must be between 1 and %d, got %d", MaxTimeoutSeconds, s.QueueTimeoutSeconds)
	}
	if s.CallbackURL != "" {
		if err := CheckCallbackURL(s.CallbackURL, cfg.Webhooks); err != nil {
			return err
		}
	}
	return nil
}

// MaxCallbackURLBytes bounds a callback_url.
const MaxCallbackURLBytes = 2048

// CheckCallbackURL refuses a callback URL that is not an absolute http(s)
// URL without user info, or whose host is not among the stage's allowed
// hosts: outcomes go only where the stage's operators said they may.
func CheckCallbackURL(raw string, w fleetconfig.Webhooks) error {
	if len(raw) > MaxCallbackURLBytes {
		return invalid("field \"callback_url\": %d bytes; at most %d are allowed", len(raw), MaxCallbackURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" {
		return invalid("field \"callback_url\": must be an absolute https:// (or http://) URL")
	}
	if u.User != nil {
		return invalid("field \"callback_url\": must not carry user info")
	}
	if u.Fragment != "" {
		return invalid("field \"callback_url\": must not carry a fragment")
	}
	if len(w.AllowedHosts) == 0 {
		return invalid("field \"callback_url\": this stage accepts no callbacks (its webhooks.allowed_hosts is empty)")
	}
	if !w.HostAllowed(u.Hostname()) {
		return invalid("field \"callback_url\": host %q is not among the stage's webhooks.allowed_hosts", u.Hostname())
	}
	port := callbackPort(u)
	if !w.Allowed(u.Hostname(), port) {
		return invalid("field \"callback_url\": port %d of host %q is not allowed; webhooks.allowed_hosts allows port %d unless an entry names another (\"%s:%d\")",
			port, u.Hostname(), fleetconfig.DefaultCallbackPort, strings.ToLower(u.Hostname()), port)
	}
	return nil
}

// callbackPort is the port a callback URL connects to: its own, or its
// scheme's (443 for https, 80 for http); 0 for one that is not a port.
func callbackPort(u *url.URL) int {
	switch p := u.Port(); {
	case p != "":
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return 0
		}
		return n
	case u.Scheme == "http":
		return 80
	default:
		return 443
	}
}

// MaxInputDepth is how deeply an input may nest objects and arrays, the
// input object itself counting as the first level: DynamoDB refuses a
// document nested past 32 levels, so an input any consumer stores as a
// DynamoDB map (or reads with a bounded parser) is refused at submit
// rather than accepted and dropped later.
const MaxInputDepth = 32

// depth is the deepest nesting of objects and arrays in a JSON text.
func depth(data []byte) int {
	d, deepest, inString, escaped := 0, 0, false, false
	for _, c := range data {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

// Spec turns a validated submission with an id into the job it asks for.
// The job's id is the job_id scoped to the tenant (tenant.JobID): the same
// job_id from two tenants is two jobs.
func (s Submission) Spec() job.Spec {
	in := s.Input
	if len(in) == 0 {
		in = json.RawMessage(`{}`)
	}
	return job.Spec{
		ID: tenant.JobID(s.TenantID, s.JobID), TenantID: s.TenantID, WorkflowID: s.WorkflowID, Priority: s.Priority, Input: in,
		MaxAttempts: s.MaxAttempts, TimeoutSeconds: s.TimeoutSeconds, QueueTimeoutSeconds: s.QueueTimeoutSeconds,
		CallbackURL: s.CallbackURL,
	}
}

// CheckResult refuses a result over MaxResultBytes: the job could not record
// it. The worker should store large results as objects and return their keys.
func CheckResult(result json.RawMessage) error {
	if len(result) > MaxResultBytes {
		return &Error{Msg: fmt.Sprintf("field \"result\": %d bytes; at most %d are allowed (store larger results as objects through the lease's output URL and return their keys)", len(result), MaxResultBytes), TooLarge: true}
	}
	return nil
}
