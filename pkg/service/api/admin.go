package api

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/version"
)

// operatorOf is who the operator route's credential named.
func operatorOf(r *http.Request) string {
	who, _ := r.Context().Value(operatorCtxKey{}).(string)
	return who
}

func contextWith(r *http.Request, key, val any) context.Context {
	return context.WithValue(r.Context(), key, val)
}

func (s *server) fleets(w http.ResponseWriter, r *http.Request) {
	var history bool
	switch h := r.URL.Query().Get("history"); h {
	case "", "false":
	case "true":
		history = true
	default:
		s.writeError(w, r, invalid(`query "history": must be true or false`))
		return
	}
	out, err := s.listFleets(r.Context(), history)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.FleetsResponse{Fleets: out})
}

func viewDecision(d fleetstate.Decision) wire.Decision {
	return wire.Decision{At: rfc3339(d.At), Desired: d.Desired, Reason: d.Reason.String(), ReasonCode: string(d.Reason.Code()), Victims: d.Victims, InService: d.InService, Inputs: d.Inputs.Map()}
}

func viewWorker(wk worker.Worker) wire.Worker {
	return wire.Worker{
		WorkerID: wk.ID, FleetSlug: wk.Fleet, InstanceID: wk.InstanceID, InstanceType: wk.InstanceType, AvailabilityZone: wk.AZ, PurchaseOption: wk.PurchaseOption,
		Status: string(wk.Status), Approved: wk.Approved, Leases: wk.Leases, MaxConcurrency: wk.MaxConcurrency,
		LastSeenAt: rfc3339(wk.LastSeenAt), RegisteredAt: rfc3339(wk.RegisteredAt),
		AgentVersion: wk.AgentVersion, VersionMismatch: wk.AgentVersion != version.Get(),
		AgentOutdated: version.Older(wk.AgentVersion, version.Get()), Capabilities: wk.Capabilities,
	}
}

func (s *server) workers(w http.ResponseWriter, r *http.Request) {
	out, err := s.listWorkers(r.Context(), r.URL.Query().Get("fleet"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.WorkersResponse{Workers: out})
}

func (s *server) workerAction(w http.ResponseWriter, r *http.Request) {
	var req wire.Empty
	if err := readBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	id, action := r.PathValue("worker_id"), r.PathValue("action")
	var (
		wk    worker.Worker
		err   error
		token string
	)
	switch action {
	case "approve":
		wk, err = s.Store.SetWorkerApproved(r.Context(), id, true)
	case "revoke":
		wk, err = s.Store.RevokeWorker(r.Context(), id)
	case "drain":
		wk, err = s.drainWorker(r.Context(), operatorOf(r), id)
	case "rotate-token":
		var cur worker.Worker
		cur, err = s.Store.GetWorker(r.Context(), id)
		if err == nil {
			var parsed auth.WorkerToken
			token, parsed = auth.NewWorkerToken(cur.Fleet, id)
			wk, err = s.Store.RotateWorkerToken(r.Context(), id, parsed.Hash)
		}
	default:
		s.writeError(w, r, notFound("no worker action %q (approve, revoke, drain, rotate-token)", action))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if action != "drain" {
		s.log.InfoContext(r.Context(), "worker "+action, "worker_id", id, "fleet", wk.Fleet, "operator", r.Context().Value(operatorCtxKey{}))
	}
	wire.WriteJSON(w, http.StatusOK, wire.WorkerActionResponse{Worker: viewWorker(wk), Token: token})
}

func (s *server) adminJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := job.Status(q.Get("status"))
	if status == "" {
		status = job.Dead
	}
	if !status.Valid() {
		s.writeError(w, r, invalid("query \"status\": must be accepted, queued, leased, succeeded, dead or canceled"))
		return
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			s.writeError(w, r, invalid("query \"limit\": must be between 1 and 1000"))
			return
		}
		limit = n
	}
	out, err := s.listJobs(r.Context(), q.Get("fleet"), status, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.JobsResponse{Jobs: out})
}

func (s *server) retryJob(w http.ResponseWriter, r *http.Request) {
	var req wire.Empty
	if err := readBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	j, err := s.retryDead(r.Context(), operatorOf(r), r.PathValue("job_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.JobStatusResponse{JobID: j.ID, Status: string(j.Status)})
}

func (s *server) rejected(w http.ResponseWriter, r *http.Request) {
	rs, err := s.Store.ListRejections(r.Context(), 100)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]wire.Rejection, 0, len(rs))
	for _, rj := range rs {
		out = append(out, wire.Rejection{MessageID: rj.MessageID, Source: rj.Source, Reason: rj.Reason, Body: rj.Body, At: rj.At})
	}
	wire.WriteJSON(w, http.StatusOK, wire.RejectedResponse{Rejected: out})
}

// maxCostWindow is the longest window GET /api/admin/costs reads (one
// partition per day).
const maxCostWindow = 366 * 24 * time.Hour

// costs is GET /api/admin/costs?since=24h.
func (s *server) costs(w http.ResponseWriter, r *http.Request) {
	window := 24 * time.Hour
	if v := r.URL.Query().Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxCostWindow {
			s.writeError(w, r, invalid("query \"since\": %q must be a duration back from now, e.g. 24h or 90m, at most 8760h", v))
			return
		}
		window = d
	}
	since := s.Clock.Now().Add(-window).UTC().Truncate(time.Hour)
	gs, err := s.Store.CostsSince(r.Context(), since)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := wire.CostsResponse{Since: since, Groups: make([]wire.CostGroup, 0, len(gs))}
	for _, g := range gs {
		out.Groups = append(out.Groups, wire.CostGroup{TenantID: g.Tenant, FleetSlug: g.Fleet, WorkflowID: g.Workflow, Jobs: g.Jobs, Unpriced: g.Unpriced, CostUSD: g.USD})
		out.TotalUSD += g.USD
	}
	out.TotalUSD = math.Round(out.TotalUSD*1e6) / 1e6
	now := s.Clock.Now()
	for _, f := range s.Config.Fleets {
		p := f.SpotPool
		if !p.Enabled() {
			continue
		}
		micro := func(d time.Duration) float64 {
			return math.Round(cost.Volumes(p.Size, p.VolumeGB, cost.GP3PricePerGBMonth, d)*1e6) / 1e6
		}
		out.PoolVolumes = append(out.PoolVolumes, wire.PoolVolumeCost{FleetSlug: f.Slug, Instances: p.Size, VolumeGB: p.VolumeGB,
			USDPerDay: micro(24 * time.Hour), USD: micro(now.Sub(since))})
	}
	wire.WriteJSON(w, http.StatusOK, out)
}
