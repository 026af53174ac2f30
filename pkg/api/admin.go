package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/fleetq/fleetq/pkg/auth"
	"github.com/fleetq/fleetq/pkg/fleetconfig"
	"github.com/fleetq/fleetq/pkg/fleetstate"
	"github.com/fleetq/fleetq/pkg/job"
	"github.com/fleetq/fleetq/pkg/store"
	"github.com/fleetq/fleetq/pkg/worker"
)

func contextWith(r *http.Request, key, val any) context.Context {
	return context.WithValue(r.Context(), key, val)
}

type decisionView struct {
	At      *string  `json:"at"`
	Desired int      `json:"desired"`
	Reason  string   `json:"reason"`
	Victims []string `json:"victims,omitempty"`
	// InService and Inputs are what the decision saw (instances in service;
	// ready, leased, booting, busy, idle ... counts).
	InService int            `json:"in_service"`
	Inputs    map[string]int `json:"inputs,omitempty"`
}

type fleetView struct {
	FleetSlug    string        `json:"fleet_slug"`
	Stage        string        `json:"stage"`
	Workflows    []string      `json:"workflows"`
	Queued       int           `json:"queued"`
	Leased       int           `json:"leased"`
	Desired      int           `json:"desired"`
	InService    int           `json:"in_service"`
	Workers      int           `json:"workers"`
	Min          int           `json:"min"`
	Max          int           `json:"max"`
	LastDecision *decisionView `json:"last_decision"`
	// History is the fleet's recent decisions, newest first, with ?history=true.
	History []decisionView `json:"history,omitempty"`
}

func (s *server) fleets(w http.ResponseWriter, r *http.Request) {
	var history bool
	switch h := r.URL.Query().Get("history"); h {
	case "", "false":
	case "true":
		history = true
	default:
		s.writeError(w, r, &Error{Status: http.StatusBadRequest, Code: "invalid_argument", Message: `query "history": must be true or false`})
		return
	}
	out := make([]fleetView, 0, len(s.Config.Fleets))
	for i := range s.Config.Fleets {
		f := &s.Config.Fleets[i]
		b, err := s.Store.CountBacklog(r.Context(), f.Slug)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		st, err := s.Store.GetFleetState(r.Context(), f.Slug)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		v := fleetView{
			FleetSlug: f.Slug, Stage: s.Config.Stage, Workflows: f.Workflows, Queued: b.Queued(), Leased: b.Leased,
			Desired: st.Desired, InService: st.InService, Workers: st.Workers, Min: f.MinInstances, Max: f.MaxInstances,
		}
		if v.Workflows == nil {
			v.Workflows = []string{}
		}
		if d := st.LastDecision; d != nil {
			dv := viewDecision(*d)
			v.LastDecision = &dv
		}
		if history {
			for _, d := range st.History {
				v.History = append(v.History, viewDecision(d))
			}
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"fleets": out})
}

func viewDecision(d fleetstate.Decision) decisionView {
	return decisionView{At: rfc3339(d.At), Desired: d.Desired, Reason: d.Reason, Victims: d.Victims, InService: d.InService, Inputs: d.Inputs}
}

type workerView struct {
	WorkerID       string  `json:"worker_id"`
	FleetSlug      string  `json:"fleet_slug"`
	InstanceID     string  `json:"instance_id"`
	InstanceType   string  `json:"instance_type,omitempty"`
	AZ             string  `json:"availability_zone,omitempty"`
	Status         string  `json:"status"`
	Approved       bool    `json:"approved"`
	Leases         int     `json:"leases"`
	MaxConcurrency int     `json:"max_concurrency"`
	LastSeenAt     *string `json:"last_seen_at"`
	RegisteredAt   *string `json:"registered_at"`
}

func viewWorker(wk worker.Worker) workerView {
	return workerView{
		WorkerID: wk.ID, FleetSlug: wk.Fleet, InstanceID: wk.InstanceID, InstanceType: wk.InstanceType, AZ: wk.AZ,
		Status: string(wk.Status), Approved: wk.Approved, Leases: wk.Leases, MaxConcurrency: wk.MaxConcurrency,
		LastSeenAt: rfc3339(wk.LastSeenAt), RegisteredAt: rfc3339(wk.RegisteredAt),
	}
}

// fleetsFromQuery returns the fleet named by ?fleet=, or every fleet.
func (s *server) fleetsFromQuery(r *http.Request) ([]*fleetconfig.Fleet, error) {
	if slug := r.URL.Query().Get("fleet"); slug != "" {
		f, ok := s.Config.Fleet(slug)
		if !ok {
			return nil, notFound("fleet %q does not exist in stage %s", slug, s.Config.Stage)
		}
		return []*fleetconfig.Fleet{f}, nil
	}
	out := make([]*fleetconfig.Fleet, 0, len(s.Config.Fleets))
	for i := range s.Config.Fleets {
		out = append(out, &s.Config.Fleets[i])
	}
	return out, nil
}

func (s *server) workers(w http.ResponseWriter, r *http.Request) {
	fleets, err := s.fleetsFromQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := []workerView{}
	for _, f := range fleets {
		ws, err := s.Store.ListWorkers(r.Context(), f.Slug)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, wk := range ws {
			out = append(out, viewWorker(wk))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"workers": out})
}

func (s *server) workerAction(w http.ResponseWriter, r *http.Request) {
	var req struct{}
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
		wk, err = s.Store.DrainWorker(r.Context(), id)
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
	s.log.InfoContext(r.Context(), "worker "+action, "worker_id", id, "fleet", wk.Fleet, "operator", r.Context().Value(operatorCtxKey{}))
	body := map[string]any{"worker": viewWorker(wk)}
	if token != "" {
		body["token"] = token
	}
	writeJSON(w, http.StatusOK, body)
}

type jobSummaryView struct {
	JobID       string     `json:"job_id"`
	TenantID    string     `json:"tenant_id"`
	WorkflowID  string     `json:"workflow_id"`
	FleetSlug   string     `json:"fleet_slug"`
	Status      job.Status `json:"status"`
	Reason      string     `json:"reason,omitempty"`
	ErrorCode   string     `json:"error_code,omitempty"`
	Attempts    int        `json:"attempts"`
	Preemptions int        `json:"preemptions"`
	UpdatedAt   *string    `json:"updated_at"`
}

func (s *server) adminJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := job.Status(q.Get("status"))
	if status == "" {
		status = job.Dead
	}
	if !status.Valid() {
		s.writeError(w, r, invalid("query \"status\": must be queued, leased, succeeded, dead or canceled"))
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
	fleets, err := s.fleetsFromQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := []jobSummaryView{}
	for _, f := range fleets {
		js, err := s.Store.ListJobs(r.Context(), f.Slug, status, limit)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, j := range js {
			out = append(out, jobSummaryView{JobID: j.ID, TenantID: j.TenantID, WorkflowID: j.WorkflowID, FleetSlug: f.Slug,
				Status: j.Status, Reason: j.Reason, ErrorCode: j.ErrorCode, Attempts: j.Attempts, Preemptions: j.Preemptions, UpdatedAt: rfc3339(j.UpdatedAt)})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out})
}

func (s *server) retryJob(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if err := readBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	j, err := s.Store.RetryDead(r.Context(), r.PathValue("job_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "dead job retried", "job_id", j.ID, "fleet", j.FleetSlug, "operator", r.Context().Value(operatorCtxKey{}))
	writeJSON(w, http.StatusOK, map[string]string{"job_id": j.ID, "status": string(j.Status)})
}

func (s *server) rejected(w http.ResponseWriter, r *http.Request) {
	rs, err := s.Store.ListRejections(r.Context(), 100)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if rs == nil {
		rs = []store.Rejection{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"rejected": rs})
}
