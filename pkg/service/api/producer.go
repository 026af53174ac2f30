package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/assets"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/submission"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

type operatorCtxKey struct{}

// operator requires the operator credential (IAM in AWS, a bearer token
// elsewhere). A tenant's API key or IAM principal is refused with 403.
func (s *server) operator(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if isAPIKey(r) {
			s.writeError(w, r, permissionDenied("an API key acts for its tenant on the producer routes; this route needs an operator's credential"))
			return
		}
		if err := s.refuseTenantCredential(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		who, err := s.Operator.AuthenticateOperator(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		next(w, r.WithContext(contextWith(r, operatorCtxKey{}, who)))
	}
}

// submit validates a submission, records it as an accepted job and puts it
// on the submission queue; the dispatch function files the job in its
// fleet's queue. From the moment submit answers, the job can be read and
// canceled. A job_id is assigned when missing, so the producer can follow
// the job, and a resubmission of the same body with that id yields one
// job. The job's id is the job_id scoped to the tenant (tenant.JobID), so
// two tenants' job_ids never meet; a job that a release before that scoping
// stored under the job_id alone is the same job.
func (s *server) submit(w http.ResponseWriter, r *http.Request) {
	data, err := readAll(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sub, err := submission.Decode(data)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c := callerOf(r)
	if sub.TenantID, err = tenantFor(c, "tenant_id", sub.TenantID); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := sub.Validate(s.Config); err != nil {
		s.writeError(w, r, err)
		return
	}
	fresh := sub.JobID == ""
	if fresh {
		sub.JobID = s.NewJobID()
	}
	sub.JobID = tenant.JobID(sub.TenantID, sub.JobID)
	body, err := json.Marshal(sub)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	j, accepted, err := s.Store.AcceptJob(r.Context(), sub.Spec(), fresh)
	var qe *tenant.QuotaError
	if errors.As(err, &qe) {
		s.log.InfoContext(r.Context(), "submission over tenant cap", "job_id", sub.JobID, "tenant_id", sub.TenantID, "max_queued", qe.Cap, "open", qe.Open)
		err = &wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeQuotaExceeded, RetryAfter: quotaRetryAfter,
			Message: fmt.Sprintf("tenant %q has %d open jobs (queued or running), its cap max_queued is %d; nothing was queued, retry after the Retry-After seconds", qe.Tenant, qe.Open, qe.Cap)}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A repeat of a job already filed (or stored by an earlier release)
	// is answered and not queued again; a repeat of one still accepted is
	// queued again, in case the first message was lost: dispatch files it
	// once.
	if accepted || j.Status == job.Accepted {
		if err := s.Queue.Enqueue(r.Context(), body); err != nil {
			if accepted {
				if werr := s.Store.WithdrawJob(r.Context(), sub.TenantID, sub.JobID); werr != nil {
					s.log.ErrorContext(r.Context(), "withdraw accepted job", "job_id", sub.JobID, "tenant_id", sub.TenantID, "error", werr.Error())
				}
			}
			s.log.ErrorContext(r.Context(), "enqueue submission", "job_id", sub.JobID, "error", err.Error())
			s.writeError(w, r, &wire.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "the submission queue did not accept the job; nothing was queued, retry"})
			return
		}
	}
	s.log.InfoContext(r.Context(), "job accepted", "job_id", j.ID, "workflow_id", sub.WorkflowID, "tenant_id", sub.TenantID, "caller", c.who, "repeat", !accepted)
	wire.WriteJSON(w, http.StatusAccepted, wire.JobStatusResponse{JobID: j.ID, Status: string(job.Accepted)})
}

// quotaRetryAfter is the Retry-After of a submission over its tenant's
// cap: about how long a short job takes to free a slot.
const quotaRetryAfter = 30 * time.Second

func readAll(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	var raw json.RawMessage
	if err := readBody(w, r, &raw, false); err != nil {
		var e *wire.Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, err
	}
	return raw, nil
}

// viewJob is GET /api/jobs/{job_id}.
func viewJob(j job.Job) wire.Job {
	v := wire.Job{
		JobID: j.ID, TenantID: j.TenantID, WorkflowID: j.WorkflowID, FleetSlug: j.FleetSlug, Status: string(j.Status), Reason: string(j.Reason),
		Attempts: j.Attempts, MaxAttempts: j.MaxAttempts, Preemptions: j.Preemptions, Priority: j.Priority,
		OnDemandOnly: j.OnDemandOnly,
		CreatedAt:    rfc3339(j.CreatedAt), UpdatedAt: rfc3339(j.UpdatedAt), Result: j.Result, CostUSD: j.CostUSD,
		History: make([]wire.JobTransition, 0, len(j.History)),
	}
	if j.Error != nil {
		v.Error = &wire.JobError{Code: j.Error.Code, Message: j.Error.Message, Retryable: j.Error.Retryable}
	}
	if len(v.Result) == 0 {
		v.Result = json.RawMessage("null")
	}
	if j.Status == job.Leased {
		v.LeaseExpiresAt = rfc3339(j.LeaseExpiresAt)
		v.WorkerID = &j.WorkerID
		v.Progress = j.Progress
	}
	if j.Status == job.Queued && j.NotBefore.After(j.UpdatedAt) {
		v.NotBefore = rfc3339(j.NotBefore)
	}
	for _, h := range j.History {
		v.History = append(v.History, wire.JobTransition{At: rfc3339(h.At), From: string(h.From), To: string(h.To), Reason: string(h.Reason), Worker: h.Worker, Attempt: h.Attempt})
	}
	if j.CallbackURL != "" {
		v.Callback = viewCallback(j.CallbackURL, j.Callback)
	}
	return v
}

// viewCallback shows a job's callback: its URL without the query and user
// info (which may carry the receiver's own secret) and its latest delivery.
func viewCallback(raw string, c *job.Callback) *wire.JobCallback {
	shown := "(unparsable)"
	if u, err := url.Parse(raw); err == nil {
		shown = u.Scheme + "://" + u.Host + u.Path
	}
	v := &wire.JobCallback{URL: shown, State: "waiting"}
	if c == nil {
		return v
	}
	v.State, v.EventID, v.Attempts, v.LastError = c.State, c.EventID, c.Attempts, c.LastError
	if !c.DeliveredAt.IsZero() {
		v.DeliveredAt = rfc3339(c.DeliveredAt)
	}
	if !c.FailedAt.IsZero() {
		v.FailedAt = rfc3339(c.FailedAt)
	}
	if c.State == job.CallbackPending && !c.NextAttemptAt.IsZero() {
		v.NextAttemptAt = rfc3339(c.NextAttemptAt)
	}
	return v
}

func (s *server) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.callerJob(r.Context(), callerOf(r), r.PathValue("job_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v := viewJob(j)
	s.withEstimate(r.Context(), &v, j)
	wire.WriteJSON(w, http.StatusOK, v)
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request) {
	var req wire.Empty
	if err := readBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	c := callerOf(r)
	j, err := s.callerJob(r.Context(), c, r.PathValue("job_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.cancelJob(r.Context(), c.who, j.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.StatusResponse{Status: string(st)})
}

// upload presigns a PUT for a producer to upload one input file under its
// tenant's prefix; the answered key is what the job's input_keys name.
func (s *server) upload(w http.ResponseWriter, r *http.Request) {
	var req wire.UploadRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	c := callerOf(r)
	var err error
	if req.TenantID, err = tenantFor(c, "tenant_id", req.TenantID); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch {
	case !assets.ValidFilename(req.Filename):
		s.writeError(w, r, invalid("field \"filename\": %q must be 1-255 letters, digits, '.', '_' or '-', starting with a letter or digit", req.Filename))
		return
	case len(req.ContentType) > 255 || strings.ContainsAny(req.ContentType, "\r\n"):
		s.writeError(w, r, invalid("field \"content_type\": must be a media type of at most 255 characters"))
		return
	}
	if s.Assets == nil {
		s.writeError(w, r, notFound("this stage has no asset bucket"))
		return
	}
	up, err := s.Assets.NewUpload(r.Context(), req.TenantID, req.Filename, req.ContentType)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "upload presigned", "tenant_id", req.TenantID, "key", up.Key, "caller", c.who)
	wire.WriteJSON(w, http.StatusOK, wire.UploadResponse{Key: up.Key, URL: up.URL, ExpiresAt: rfc3339(up.ExpiresAt)})
}

// jobLogs answers a presigned GET of each run's runner output.
func (s *server) jobLogs(w http.ResponseWriter, r *http.Request) {
	j, err := s.callerJob(r.Context(), callerOf(r), r.PathValue("job_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.Assets == nil {
		s.writeError(w, r, notFound("this stage has no asset bucket, so no job logs"))
		return
	}
	urls, err := s.Assets.LogURLs(r.Context(), j)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := wire.JobLogsResponse{JobID: j.ID, Logs: make([]wire.JobLog, 0, len(urls))}
	for _, u := range urls {
		out.Logs = append(out.Logs, wire.JobLog{Attempt: u.Run, URL: u.URL, ExpiresAt: rfc3339(u.ExpiresAt)})
	}
	wire.WriteJSON(w, http.StatusOK, out)
}
