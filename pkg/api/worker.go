package api

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"

	"github.com/fleetq/fleetq/pkg/auth"
	"github.com/fleetq/fleetq/pkg/fleetconfig"
	"github.com/fleetq/fleetq/pkg/job"
	"github.com/fleetq/fleetq/pkg/store"
	"github.com/fleetq/fleetq/pkg/strictjson"
	"github.com/fleetq/fleetq/pkg/submission"
)

func decode(data []byte, v any, allowEmpty bool) error {
	return strictjson.Decode(data, v, allowEmpty)
}

type registerRequest struct {
	WorkerID         string          `json:"worker_id"`
	FleetSlug        string          `json:"fleet_slug"`
	Stage            string          `json:"stage"`
	MaxConcurrency   *int            `json:"max_concurrency"`
	InstanceID       string          `json:"instance_id"`
	InstanceType     string          `json:"instance_type"`
	AvailabilityZone string          `json:"availability_zone"`
	Capabilities     json.RawMessage `json:"capabilities"`
	Providers        []string        `json:"providers"`
}

type registerResponse struct {
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

// register checks, in order: the source's rate (every attempt counts, so the
// fleet secret cannot be guessed at speed), the fleet secret, the body, the
// stage and fleet, the fleet's workflows, and its worker cap.
func (s *server) register(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if wait, err := s.Store.TakeRegistrationSlot(ctx, sourceAddress(r), s.RegisterLimit); err != nil {
		if errors.Is(err, store.ErrRateLimited) {
			secs := int(math.Ceil(wait.Seconds()))
			s.writeError(w, r, &Error{Status: http.StatusTooManyRequests, Code: "rate_limited", RetryAfter: secs,
				Message: "too many registrations from this address; retry after the Retry-After seconds"})
			return
		}
		s.writeError(w, r, err)
		return
	}
	secret, err := s.FleetSecret.FleetSecret(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !auth.Equal(r.Header.Get("X-Fleet-Secret"), secret) {
		s.writeError(w, r, &Error{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "the X-Fleet-Secret header is missing or wrong"})
		return
	}
	var req registerRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	f, err := s.validateRegistration(&req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	token, parsed := auth.NewWorkerToken(f.Slug, req.WorkerID)
	caps, _ := strictjson.RequireObject("capabilities", req.Capabilities)
	wk, err := s.Store.RegisterWorker(ctx, store.Registration{
		WorkerID: req.WorkerID, Fleet: f.Slug, Stage: req.Stage,
		InstanceID: req.InstanceID, InstanceType: req.InstanceType, AZ: req.AvailabilityZone,
		Capabilities: caps, Providers: req.Providers, MaxConcurrency: *req.MaxConcurrency,
		TokenHash: parsed.Hash, SourceIP: sourceAddress(r),
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(ctx, "worker registered", "worker_id", wk.ID, "fleet", f.Slug, "instance_id", wk.InstanceID, "approved", wk.Approved)
	writeJSON(w, http.StatusCreated, registerResponse{
		WorkerID: wk.ID, Token: token, WorkflowsAssigned: f.Workflows,
		LeaseSeconds: f.LeaseSeconds, HeartbeatSeconds: f.HeartbeatSeconds, PollSeconds: f.PollSeconds,
		Approved: wk.Approved,
	})
}

func (s *server) validateRegistration(req *registerRequest) (*fleetconfig.Fleet, error) {
	switch {
	case req.WorkerID == "":
		return nil, invalid("field \"worker_id\" is required")
	case !submission.IDPattern.MatchString(req.WorkerID):
		return nil, invalid("field \"worker_id\": %q must be 1-128 letters, digits, '.', '_', ':' or '-'", req.WorkerID)
	case req.FleetSlug == "":
		return nil, invalid("field \"fleet_slug\" is required")
	case req.Stage == "":
		return nil, invalid("field \"stage\" is required")
	case req.Stage != s.Config.Stage:
		return nil, invalid("field \"stage\": this is stage %q, not %q", s.Config.Stage, req.Stage)
	}
	if req.MaxConcurrency == nil {
		one := 1
		req.MaxConcurrency = &one
	}
	if *req.MaxConcurrency < 1 || *req.MaxConcurrency > fleetconfig.MaxSlots {
		return nil, invalid("field \"max_concurrency\": must be between 1 and %d, got %d", fleetconfig.MaxSlots, *req.MaxConcurrency)
	}
	for _, v := range []struct{ name, val string }{{"instance_id", req.InstanceID}, {"instance_type", req.InstanceType}, {"availability_zone", req.AvailabilityZone}} {
		if len(v.val) > 128 {
			return nil, invalid("field %q: at most 128 characters", v.name)
		}
	}
	if _, err := strictjson.RequireObject("capabilities", req.Capabilities); err != nil {
		return nil, err
	}
	if len(req.Providers) > 16 {
		return nil, invalid("field \"providers\": at most 16 entries")
	}
	f, ok := s.Config.Fleet(req.FleetSlug)
	if !ok {
		return nil, notFound("fleet %q does not exist in stage %s", req.FleetSlug, s.Config.Stage)
	}
	if len(f.Workflows) == 0 {
		return nil, &Error{Status: http.StatusUnprocessableEntity, Code: "no_workflows", Message: "fleet " + f.Slug + " has no workflow assigned; a worker would get no jobs"}
	}
	return f, nil
}

type workerCtxKey struct{}

// worker authenticates a worker route by its bearer token. The token's digest
// is checked again inside every store write, so this only parses it.
func (s *server) worker(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := auth.BearerToken(r.Header.Get("Authorization"))
		if !ok {
			s.writeError(w, r, &Error{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "send the worker token as Authorization: Bearer <token>"})
			return
		}
		parsed, err := auth.ParseWorkerToken(tok)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if _, ok := s.Config.Fleet(parsed.Fleet); !ok {
			s.writeError(w, r, store.ErrUnauthenticated)
			return
		}
		a := store.WorkerAuth{WorkerID: parsed.WorkerID, Fleet: parsed.Fleet, TokenHash: parsed.Hash}
		next(w, r.WithContext(context.WithValue(r.Context(), workerCtxKey{}, a)))
	}
}

func workerOf(r *http.Request) store.WorkerAuth {
	return r.Context().Value(workerCtxKey{}).(store.WorkerAuth)
}

type pollRequest struct {
	CurrentLoad *int `json:"current_load"`
}

type leasedJob struct {
	JobID          string            `json:"job_id"`
	TenantID       string            `json:"tenant_id"`
	WorkflowID     string            `json:"workflow_id"`
	Priority       int               `json:"priority"`
	Attempt        int               `json:"attempt"`
	LeaseToken     string            `json:"lease_token"`
	LeaseExpiresAt *string           `json:"lease_expires_at"`
	TimeoutSeconds int               `json:"timeout_seconds"`
	Input          json.RawMessage   `json:"input"`
	InputURLs      map[string]string `json:"input_urls"`
	OutputURL      string            `json:"output_url"`
	// OutputURLs has one URL per output the job's input names in "outputs".
	OutputURLs map[string]string `json:"output_urls,omitempty"`
}

func (s *server) poll(w http.ResponseWriter, r *http.Request) {
	var req pollRequest
	if err := readBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.CurrentLoad != nil && (*req.CurrentLoad < 0 || *req.CurrentLoad > fleetconfig.MaxSlots) {
		s.writeError(w, r, invalid("field \"current_load\": must be between 0 and %d", fleetconfig.MaxSlots))
		return
	}
	a := workerOf(r)
	f, _ := s.Config.Fleet(a.Fleet)
	j, err := s.Store.LeaseNext(r.Context(), a, f.Workflows)
	if errors.Is(err, store.ErrNoJob) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := leasedJob{
		JobID: j.ID, TenantID: j.TenantID, WorkflowID: j.WorkflowID, Priority: j.Priority, Attempt: j.Attempts,
		LeaseToken: j.LeaseToken, LeaseExpiresAt: rfc3339(j.LeaseExpiresAt), TimeoutSeconds: j.TimeoutSeconds,
		Input: j.Input, InputURLs: map[string]string{},
	}
	if len(out.Input) == 0 {
		out.Input = json.RawMessage(`{}`)
	}
	if s.Assets != nil {
		u, err := s.Assets.LeaseURLs(r.Context(), j)
		if err != nil {
			// The lease stands; the job comes back to the queue when it
			// expires. Say why rather than hand out a job without its inputs.
			s.log.ErrorContext(r.Context(), "presign lease urls", "job_id", j.ID, "error", err.Error())
			s.writeError(w, r, err)
			return
		}
		out.InputURLs, out.OutputURL, out.OutputURLs = u.Inputs, u.Output, u.Outputs
	}
	s.log.InfoContext(r.Context(), "job leased", "job_id", j.ID, "worker_id", a.WorkerID, "fleet", a.Fleet, "attempt", j.Attempts)
	writeJSON(w, http.StatusOK, map[string]any{"job": out})
}

type leaseRef struct {
	JobID      string `json:"job_id"`
	LeaseToken string `json:"lease_token"`
}

func (l leaseRef) validate() error {
	if l.JobID == "" {
		return invalid("field \"job_id\" is required")
	}
	if l.LeaseToken == "" {
		return invalid("field \"lease_token\" is required")
	}
	if len(l.JobID) > 128 || len(l.LeaseToken) > 128 {
		return invalid("job_id and lease_token are at most 128 characters")
	}
	return nil
}

type heartbeatRequest struct {
	leaseRef
	Progress *float64 `json:"progress"`
	// RefreshURLs asks for fresh presigned URLs, valid for the extended lease.
	RefreshURLs bool `json:"refresh_urls"`
}

func (s *server) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req heartbeatRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := req.validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Progress != nil && (*req.Progress < 0 || *req.Progress > 1 || math.IsNaN(*req.Progress)) {
		s.writeError(w, r, invalid("field \"progress\": must be between 0 and 1"))
		return
	}
	res, err := s.Store.Heartbeat(r.Context(), workerOf(r), req.JobID, req.LeaseToken, req.Progress)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body := map[string]any{"lease_expires_at": rfc3339(res.LeaseExpiresAt), "cancel": res.Cancel}
	if req.RefreshURLs && s.Assets != nil && !res.Cancel {
		j, err := s.Store.GetJob(r.Context(), req.JobID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		j.LeaseExpiresAt = res.LeaseExpiresAt
		u, err := s.Assets.LeaseURLs(r.Context(), j)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		body["input_urls"], body["output_url"] = u.Inputs, u.Output
		if len(u.Outputs) > 0 {
			body["output_urls"] = u.Outputs
		}
	}
	writeJSON(w, http.StatusOK, body)
}

type completeRequest struct {
	leaseRef
	Result json.RawMessage `json:"result"`
}

func (s *server) complete(w http.ResponseWriter, r *http.Request) {
	var req completeRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := req.validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	result, err := strictjson.RequireObject("result", req.Result)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.Store.Complete(r.Context(), workerOf(r), req.JobID, req.LeaseToken, result); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.announce(r.Context(), req.JobID)
	writeJSON(w, http.StatusOK, map[string]string{"status": string(job.Succeeded)})
}

type failRequest struct {
	leaseRef
	Error *struct {
		Message   string `json:"message"`
		Retryable *bool  `json:"retryable"`
		Code      string `json:"code"`
	} `json:"error"`
}

func (s *server) fail(w http.ResponseWriter, r *http.Request) {
	var req failRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := req.validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Error == nil || req.Error.Message == "" {
		s.writeError(w, r, invalid("field \"error.message\" is required"))
		return
	}
	if len(req.Error.Message) > 8192 || len(req.Error.Code) > 128 {
		s.writeError(w, r, invalid("error.message is at most 8192 characters and error.code at most 128"))
		return
	}
	// A failure is retryable unless the worker says it is not: attempts
	// bound the retries either way.
	retryable := req.Error.Retryable == nil || *req.Error.Retryable
	out, err := s.Store.Fail(r.Context(), workerOf(r), req.JobID, req.LeaseToken, job.Error{Code: req.Error.Code, Message: req.Error.Message, Retryable: retryable})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.announce(r.Context(), req.JobID)
	writeJSON(w, http.StatusOK, outcomeBody(out))
}

func outcomeBody(o job.Outcome) map[string]any {
	body := map[string]any{"status": string(o.Status)}
	if !o.NotBefore.IsZero() {
		body["not_before"] = rfc3339(o.NotBefore)
	}
	return body
}

type requeueRequest struct {
	leaseRef
	Reason string `json:"reason"`
}

func (s *server) requeue(w http.ResponseWriter, r *http.Request) {
	var req requeueRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := req.validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	reason, err := job.ParsePreemptReason(req.Reason)
	if err != nil {
		s.writeError(w, r, invalid("field \"reason\": %v", err))
		return
	}
	out, err := s.Store.Requeue(r.Context(), workerOf(r), req.JobID, req.LeaseToken, reason)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.announce(r.Context(), req.JobID)
	writeJSON(w, http.StatusOK, outcomeBody(out))
}

func (s *server) deregister(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if err := readBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	a := workerOf(r)
	if err := s.Store.DeregisterWorker(r.Context(), a); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "worker deregistered", "worker_id", a.WorkerID, "fleet", a.Fleet)
	writeJSON(w, http.StatusOK, map[string]string{"status": "deregistered"})
}
