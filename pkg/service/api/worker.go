package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/submission"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/strictjson"
	"github.com/fleetq/fleetq/pkg/lib/version"
)

func decode(data []byte, v any, allowEmpty bool) error {
	return strictjson.Decode(data, v, allowEmpty)
}

// registrationCaller takes a slot of the source's registration rate (every
// attempt counts, so a fleet secret cannot be guessed at speed) and then
// proves the caller from its headers alone; what names the calls the rate
// counts in its 429.
func (s *server) registrationCaller(r *http.Request, what string) (registrationProof, error) {
	if wait, err := s.Store.TakeRegistrationSlot(r.Context(), sourceAddress(r), s.RegisterLimit); err != nil {
		if errors.Is(err, fault.ErrRateLimited) {
			secs := int(math.Ceil(wait.Seconds()))
			return registrationProof{}, &wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeRateLimited, RetryAfter: time.Duration(secs) * time.Second,
				Message: "too many " + what + " from this address; retry after the Retry-After seconds"}
		}
		return registrationProof{}, err
	}
	return s.authenticateRegistration(r)
}

// register checks, in order: the source's rate (every attempt counts, so a
// fleet secret cannot be guessed at speed), the caller's proof of
// membership from its headers alone (an attested AWS identity, or a fleet's
// secret), then the body, the stage and fleet, that the proof is for that
// fleet, the fleet's workflows, and its worker cap. Nothing of the body is
// read before the caller is known.
func (s *server) register(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	proof, err := s.registrationCaller(r, "registrations")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req wire.RegisterRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	f, err := s.validateRegistration(&req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := proof.admits(f, req.WorkerID, &req.InstanceID); err != nil {
		s.writeError(w, r, err)
		return
	}
	attested := proof.identity != nil
	if len(f.Workflows) == 0 {
		s.writeError(w, r, &wire.Error{Status: http.StatusUnprocessableEntity, Code: wire.CodeNoWorkflows, Message: "fleet " + f.Slug + " has no workflow assigned; a worker would get no jobs"})
		return
	}
	boot, err := parseBoot(req.Boot, s.Clock.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if id := proof.identity; id != nil && id.SpotPool {
		boot = spotPoolBoot(boot, id.PoolStartedAt)
	}
	token, parsed := auth.NewWorkerToken(f.Slug, req.WorkerID)
	caps, _ := strictjson.RequireObject("capabilities", req.Capabilities)
	wk, err := s.Store.RegisterWorker(ctx, worker.Registration{
		WorkerID: req.WorkerID, Fleet: f.Slug, Stage: req.Stage,
		InstanceID: req.InstanceID, InstanceType: req.InstanceType, AZ: req.AvailabilityZone, PurchaseOption: req.PurchaseOption,
		Capabilities: caps, Providers: req.Providers, MaxConcurrency: *req.MaxConcurrency,
		TokenHash: parsed.Hash, SourceIP: sourceAddress(r), AgentKeyHash: agentKeyHash(req.AgentKey), AgentVersion: req.AgentVersion,
		Boot: boot,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.checked.remember(worker.Auth{WorkerID: wk.ID, Fleet: f.Slug, TokenHash: parsed.Hash})
	s.log.InfoContext(ctx, "worker registered", "worker_id", wk.ID, "fleet", f.Slug, "instance_id", wk.InstanceID, "approved", wk.Approved,
		"agent_version", req.AgentVersion, "attested", attested)
	if req.AgentVersion != version.Get() {
		// Accepted: the worker routes change only additively, and refusing
		// would leave a paid instance unable to work until replaced.
		s.log.WarnContext(ctx, "agent version differs from the API's", "worker_id", wk.ID, "fleet", f.Slug,
			"agent_version", req.AgentVersion, "api_version", version.Get())
	}
	wire.WriteJSON(w, http.StatusCreated, wire.RegisterResponse{
		WorkerID: wk.ID, Token: token, WorkflowsAssigned: f.Workflows,
		LeaseSeconds: f.LeaseSeconds, HeartbeatSeconds: f.HeartbeatSeconds, PollSeconds: f.PollSeconds,
		Approved: wk.Approved,
	})
}

// agentKeyHash is the stored form of an agent key ("" for none).
func agentKeyHash(key string) string {
	if key == "" {
		return ""
	}
	return auth.HashToken(key)
}

func (s *server) validateRegistration(req *wire.RegisterRequest) (*fleetconfig.Fleet, error) {
	switch {
	case req.WorkerID == "":
		return nil, invalid("field \"worker_id\" is required")
	case len(req.AgentVersion) > 128:
		return nil, invalid("field \"agent_version\": at most 128 characters")
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
	switch req.PurchaseOption {
	case "", cost.Spot, cost.OnDemand:
	default:
		return nil, invalid("field \"purchase_option\": %q must be %s or %s", req.PurchaseOption, cost.Spot, cost.OnDemand)
	}
	if _, err := strictjson.RequireObject("capabilities", req.Capabilities); err != nil {
		return nil, err
	}
	if len(req.Providers) > 16 {
		return nil, invalid("field \"providers\": at most 16 entries")
	}
	if k := len(req.AgentKey); k != 0 && (k < 16 || k > 256) {
		return nil, invalid("field \"agent_key\": must be 16 to 256 characters")
	}
	f, ok := s.Config.Fleet(req.FleetSlug)
	if !ok {
		return nil, notFound("fleet %q does not exist in stage %s", req.FleetSlug, s.Config.Stage)
	}
	return f, nil
}

// registrationProof is what a registration's headers proved: an attested
// instance of one fleet, or a secret of some fleets.
type registrationProof struct {
	identity *attest.Identity
	// secretOf lists the fleets whose secret the caller presented.
	secretOf []string
}

// authenticateRegistration checks the registration's credential, from its
// headers alone: X-Fleetq-Identity (an attested identity, verified by STS
// and against the fleets' roles and groups) or X-Fleet-Secret (one of the
// secrets of the fleets that accept one).
func (s *server) authenticateRegistration(r *http.Request) (registrationProof, error) {
	ctx := r.Context()
	if h := r.Header.Get(wire.HeaderIdentity); h != "" {
		if s.Attestor == nil {
			return registrationProof{}, &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: "this stage accepts no attested registration; register with the fleet's secret"}
		}
		id, err := wire.DecodeIdentity(h)
		if err != nil {
			return registrationProof{}, &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: err.Error()}
		}
		got, err := s.Attestor.Verify(ctx, id)
		if err != nil {
			s.log.WarnContext(ctx, "attested registration refused", "error", err.Error())
			return registrationProof{}, err
		}
		return registrationProof{identity: &got}, nil
	}
	presented := r.Header.Get(wire.HeaderFleetSecret)
	if presented == "" {
		return registrationProof{}, &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated,
			Message: "send an attested identity (X-Fleetq-Identity) or the fleet's secret (X-Fleet-Secret)"}
	}
	var p registrationProof
	if s.FleetSecrets != nil {
		for _, f := range s.Config.Fleets {
			if !f.AcceptSecret {
				continue
			}
			accepted, err := s.FleetSecrets.FleetSecrets(ctx, f.Slug)
			if err != nil {
				return registrationProof{}, err
			}
			if auth.EqualAny(presented, accepted) {
				p.secretOf = append(p.secretOf, f.Slug)
			}
		}
	}
	if len(p.secretOf) == 0 {
		return registrationProof{}, &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: "the X-Fleet-Secret header is not the secret of a fleet that accepts one"}
	}
	return p, nil
}

// admits checks that the proof is for fleet f: the attested instance is
// one of f's (and the request's instance, which it fills in when empty,
// and the worker id that instance's), or the secret is f's own.
func (p registrationProof) admits(f *fleetconfig.Fleet, workerID string, instanceID *string) error {
	id := p.identity
	if id == nil {
		if !slices.Contains(p.secretOf, f.Slug) {
			return &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: "the X-Fleet-Secret header is not fleet " + f.Slug + "'s secret"}
		}
		return nil
	}
	if id.Fleet != f.Slug {
		return &wire.Error{Status: http.StatusForbidden, Code: wire.CodePermissionDenied,
			Message: fmt.Sprintf("attested registration: instance %s is fleet %s's, not fleet %s's", id.InstanceID, id.Fleet, f.Slug)}
	}
	if *instanceID == "" {
		*instanceID = id.InstanceID
	}
	if *instanceID != id.InstanceID {
		return &wire.Error{Status: http.StatusForbidden, Code: wire.CodePermissionDenied,
			Message: fmt.Sprintf("field \"instance_id\": %q, but the identity proves instance %s", *instanceID, id.InstanceID)}
	}
	if workerID != id.InstanceID && !strings.HasPrefix(workerID, id.InstanceID+"-") {
		return &wire.Error{Status: http.StatusForbidden, Code: wire.CodePermissionDenied,
			Message: fmt.Sprintf("field \"worker_id\": an instance's workers are named after it: %s or %s-<slot>", id.InstanceID, id.InstanceID)}
	}
	return nil
}

type workerCtxKey struct{}

// worker authenticates a worker route by its bearer token before its body
// is read: the token is parsed and its digest checked against the worker's
// (a read of the worker item, skipped while this process remembers the
// token from an earlier check). Every store write checks the digest again,
// so a token revoked or replaced since is still refused there; a refusal
// makes the process forget the token.
func (s *server) worker(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := auth.BearerToken(r.Header.Get("Authorization"))
		if !ok {
			s.writeError(w, r, &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: "send the worker token as Authorization: Bearer <token>"})
			return
		}
		parsed, err := auth.ParseWorkerToken(tok)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if _, ok := s.Config.Fleet(parsed.Fleet); !ok {
			s.writeError(w, r, fault.ErrUnauthenticated)
			return
		}
		a := worker.Auth{WorkerID: parsed.WorkerID, Fleet: parsed.Fleet, TokenHash: parsed.Hash}
		if err := s.authorizeWorker(r.Context(), a); err != nil {
			s.writeError(w, r, err)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next(rec, r.WithContext(context.WithValue(r.Context(), workerCtxKey{}, a)))
		if rec.status == http.StatusUnauthorized || rec.status == http.StatusForbidden {
			s.checked.forget(a.WorkerID)
		}
	}
}

func workerOf(r *http.Request) worker.Auth {
	return r.Context().Value(workerCtxKey{}).(worker.Auth)
}

func (s *server) poll(w http.ResponseWriter, r *http.Request) {
	var req wire.PollRequest
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
	if errors.Is(err, fault.ErrNoJob) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := wire.LeasedJob{
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
		out.InputURLs, out.OutputURL, out.OutputURLs, out.LogURL = u.Inputs, u.Output, u.Outputs, u.Log
	}
	s.log.InfoContext(r.Context(), "job leased", "job_id", j.ID, "worker_id", a.WorkerID, "fleet", a.Fleet, "attempt", j.Attempts)
	wire.WriteJSON(w, http.StatusOK, wire.PollResponse{Job: &out})
}

// readLeased reads a lease-fenced report into req and checks its lease
// reference (ref points into req); false means the error is answered.
func (s *server) readLeased(w http.ResponseWriter, r *http.Request, req any, ref *wire.LeaseRef) bool {
	if err := readBody(w, r, req, false); err != nil {
		s.writeError(w, r, err)
		return false
	}
	if err := validateLease(*ref); err != nil {
		s.writeError(w, r, err)
		return false
	}
	return true
}

func validateLease(l wire.LeaseRef) error {
	if l.JobID == "" {
		return invalid("field \"job_id\" is required")
	}
	if l.LeaseToken == "" {
		return invalid("field \"lease_token\" is required")
	}
	if len(l.JobID) > tenant.MaxJobIDLength {
		return invalid("field \"job_id\": at most %d characters (a tenant, ':' and a job key)", tenant.MaxJobIDLength)
	}
	if len(l.LeaseToken) > 128 {
		return invalid("field \"lease_token\": at most 128 characters")
	}
	return nil
}

func (s *server) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req wire.HeartbeatRequest
	if !s.readLeased(w, r, &req, &req.LeaseRef) {
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
	body := wire.HeartbeatResponse{LeaseExpiresAt: rfc3339(res.LeaseExpiresAt), Cancel: res.Cancel}
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
		body.LeaseURLs = &wire.LeaseURLs{InputURLs: u.Inputs, OutputURL: u.Output, OutputURLs: u.Outputs, LogURL: u.Log}
	}
	wire.WriteJSON(w, http.StatusOK, body)
}

func (s *server) complete(w http.ResponseWriter, r *http.Request) {
	var req wire.CompleteRequest
	if !s.readLeased(w, r, &req, &req.LeaseRef) {
		return
	}
	result, err := strictjson.RequireObject("result", req.Result)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := submission.CheckResult(result); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.Store.Complete(r.Context(), workerOf(r), req.JobID, req.LeaseToken, result); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.announce(r.Context(), req.JobID)
	wire.WriteJSON(w, http.StatusOK, wire.StatusResponse{Status: string(job.Succeeded)})
}

func (s *server) fail(w http.ResponseWriter, r *http.Request) {
	var req wire.FailRequest
	if !s.readLeased(w, r, &req, &req.LeaseRef) {
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
	wire.WriteJSON(w, http.StatusOK, outcomeBody(out))
}

func outcomeBody(o job.Outcome) wire.OutcomeResponse {
	return wire.OutcomeResponse{Status: string(o.Status), NotBefore: rfc3339(o.NotBefore)}
}

func (s *server) requeue(w http.ResponseWriter, r *http.Request) {
	var req wire.RequeueRequest
	if !s.readLeased(w, r, &req, &req.LeaseRef) {
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
	wire.WriteJSON(w, http.StatusOK, outcomeBody(out))
}

func (s *server) deregister(w http.ResponseWriter, r *http.Request) {
	var req wire.Empty
	if err := readBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	a := workerOf(r)
	if err := s.Store.DeregisterWorker(r.Context(), a); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.checked.forget(a.WorkerID)
	s.log.InfoContext(r.Context(), "worker deregistered", "worker_id", a.WorkerID, "fleet", a.Fleet)
	wire.WriteJSON(w, http.StatusOK, wire.StatusResponse{Status: "deregistered"})
}

// unhealthy marks the worker unhealthy: its leases go back to the queue
// (no attempt spent), it takes no new work, and the scaler replaces its
// instance once idle.
func (s *server) unhealthy(w http.ResponseWriter, r *http.Request) {
	var req wire.UnhealthyRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	switch {
	case strings.TrimSpace(req.Reason) == "":
		s.writeError(w, r, invalid("field \"reason\" is required"))
		return
	case len(req.Reason) > 1024:
		s.writeError(w, r, invalid("field \"reason\" is longer than 1024 characters"))
		return
	}
	a := workerOf(r)
	wk, err := s.Store.MarkWorkerUnhealthy(r.Context(), a)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.WarnContext(r.Context(), "worker unhealthy", "worker_id", a.WorkerID, "fleet", wk.Fleet, "instance_id", wk.InstanceID, "reason", req.Reason)
	wire.WriteJSON(w, http.StatusOK, wire.StatusResponse{Status: string(worker.Unhealthy)})
}

// bootReport records, on the fleet, that an instance's agent will not
// register because its machine cannot work (the runner's program is not
// on its image). It is proved as a registration is, and counts against the
// same per-address limit: an attested instance speaks only for itself in
// its own fleet, a fleet's secret only for that fleet. Nothing is
// registered and no token is issued.
func (s *server) bootReport(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	proof, err := s.registrationCaller(r, "registrations and boot reports")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req wire.BootReportRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	f, err := s.validateBootReport(&req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := proof.admits(f, req.WorkerID, &req.InstanceID); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.InstanceID == "" {
		req.InstanceID = req.WorkerID
	}
	rep := worker.BootReport{Fleet: f.Slug, InstanceID: req.InstanceID, WorkerID: req.WorkerID, InstanceType: req.InstanceType,
		ImageID: req.ImageID, Problem: req.Problem, Message: req.Message, AgentVersion: req.AgentVersion, At: s.Clock.Now()}
	if err := s.Store.PutBootReport(ctx, rep); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.WarnContext(ctx, "instance cannot work: boot report", "worker_id", req.WorkerID, "fleet", f.Slug, "instance_id", req.InstanceID,
		"image_id", req.ImageID, "problem", req.Problem, "message", req.Message, "attested", proof.identity != nil)
	wire.WriteJSON(w, http.StatusOK, wire.StatusResponse{Status: "recorded"})
}

func (s *server) validateBootReport(req *wire.BootReportRequest) (*fleetconfig.Fleet, error) {
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
	case req.Problem != wire.BootProblemRunnerMissing:
		return nil, invalid("field \"problem\": %q must be %s", req.Problem, wire.BootProblemRunnerMissing)
	case strings.TrimSpace(req.Message) == "":
		return nil, invalid("field \"message\" is required")
	case len(req.Message) > 1024:
		return nil, invalid("field \"message\" is longer than 1024 characters")
	}
	for _, v := range []struct{ name, val string }{{"instance_id", req.InstanceID}, {"instance_type", req.InstanceType},
		{"image_id", req.ImageID}, {"agent_version", req.AgentVersion}} {
		if len(v.val) > 128 {
			return nil, invalid("field %q: at most 128 characters", v.name)
		}
	}
	f, ok := s.Config.Fleet(req.FleetSlug)
	if !ok {
		return nil, notFound("fleet %q does not exist in stage %s", req.FleetSlug, s.Config.Stage)
	}
	return f, nil
}
