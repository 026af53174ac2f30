package api

import (
	"context"
	"net/http"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/version"
)

// The operator work below is shared by the JSON admin routes and the
// operator console (pkg/service/console), so a button in the console does
// exactly what the route does.

// listFleets is every fleet's backlog, capacity and last decision, with its
// decision history when history is set.
func (s *server) listFleets(ctx context.Context, history bool) ([]wire.Fleet, error) {
	out := make([]wire.Fleet, 0, len(s.Config.Fleets))
	for i := range s.Config.Fleets {
		f := &s.Config.Fleets[i]
		b, err := s.Store.CountBacklog(ctx, f.Slug)
		if err != nil {
			return nil, err
		}
		st, err := s.Store.GetFleetState(ctx, f.Slug)
		if err != nil {
			return nil, err
		}
		v := wire.Fleet{
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
		ws, err := s.fleetWorkers(ctx, f.Slug)
		if err != nil {
			return nil, err
		}
		v.Boot = fleetBoot(ws)
		for _, wk := range ws {
			if version.Older(wk.AgentVersion, version.Get()) {
				v.OutdatedAgents++
			}
		}
		reports, err := s.Store.BootReports(ctx, f.Slug)
		if err != nil {
			return nil, err
		}
		for _, rep := range reports {
			v.BootProblems = append(v.BootProblems, wire.BootProblem{InstanceID: rep.InstanceID, WorkerID: rep.WorkerID,
				InstanceType: rep.InstanceType, ImageID: rep.ImageID, Problem: rep.Problem, Message: rep.Message,
				AgentVersion: rep.AgentVersion, ReportedAt: *rfc3339(rep.At)})
		}
		out = append(out, v)
	}
	return out, nil
}

// fleetsNamed returns the fleet slug names, or every fleet for "".
func (s *server) fleetsNamed(slug string) ([]*fleetconfig.Fleet, error) {
	if slug != "" {
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

// listWorkers is the workers of one fleet, or of every fleet for "", with
// the GPUs each agent reported: the fleet index the listing reads leaves
// capabilities out (they can be large), so each worker's own item is read
// for them (an operator view of tens of workers).
func (s *server) listWorkers(ctx context.Context, fleet string) ([]wire.Worker, error) {
	fleets, err := s.fleetsNamed(fleet)
	if err != nil {
		return nil, err
	}
	out := []wire.Worker{}
	for _, f := range fleets {
		ws, err := s.Store.ListWorkers(ctx, f.Slug)
		if err != nil {
			return nil, err
		}
		for _, wk := range ws {
			if full, err := s.Store.GetWorker(ctx, wk.ID); err == nil {
				wk.Capabilities = full.Capabilities
			} // else deregistered since the listing
			out = append(out, viewWorker(wk))
		}
	}
	return out, nil
}

// listJobs is up to limit jobs per fleet in one status, of one fleet or of
// every fleet for "".
func (s *server) listJobs(ctx context.Context, fleet string, status job.Status, limit int) ([]wire.JobSummary, error) {
	if !status.Valid() {
		return nil, invalid("query \"status\": must be accepted, queued, leased, succeeded, dead or canceled")
	}
	fleets, err := s.fleetsNamed(fleet)
	if err != nil {
		return nil, err
	}
	out := []wire.JobSummary{}
	for _, f := range fleets {
		js, err := s.Store.ListJobs(ctx, f.Slug, status, limit)
		if err != nil {
			return nil, err
		}
		for _, j := range js {
			j.Fleet = f.Slug
			v := summaryOf(j)
			s.summaryEstimate(ctx, &v, j)
			out = append(out, v)
		}
	}
	return out, nil
}

// cancelJob cancels a job and announces its event; operator is who asked.
func (s *server) cancelJob(ctx context.Context, operator, id string) (job.Status, error) {
	st, err := s.Store.Cancel(ctx, id)
	if err != nil {
		return "", err
	}
	s.announce(ctx, id)
	s.log.InfoContext(ctx, "job cancel", "job_id", id, "operator", operator)
	return st, nil
}

// retryDead queues a dead job again.
func (s *server) retryDead(ctx context.Context, operator, id string) (job.Job, error) {
	j, err := s.Store.RetryDead(ctx, id)
	if err != nil {
		return job.Job{}, err
	}
	s.log.InfoContext(ctx, "dead job retried", "job_id", j.ID, "fleet", j.FleetSlug, "operator", operator)
	return j, nil
}

// drainWorker stops a worker from leasing more work; it finishes what it
// holds.
func (s *server) drainWorker(ctx context.Context, operator, id string) (worker.Worker, error) {
	wk, err := s.Store.DrainWorker(ctx, id)
	if err != nil {
		return worker.Worker{}, err
	}
	s.log.InfoContext(ctx, "worker drain", "worker_id", id, "fleet", wk.Fleet, "operator", operator)
	return wk, nil
}

// consoleOps is the operator console's view of the API: the same work as
// the admin routes, with errors already in the contract's shape.
type consoleOps struct{ s *server }

func (o consoleOps) Fleets(ctx context.Context) ([]wire.Fleet, error) {
	v, err := o.s.listFleets(ctx, true)
	return v, o.wireErr(ctx, err)
}

// Workers lists every worker with the GPUs its agent reported.
func (o consoleOps) Workers(ctx context.Context) ([]wire.Worker, error) {
	v, err := o.s.listWorkers(ctx, "")
	return v, o.wireErr(ctx, err)
}

func (o consoleOps) Jobs(ctx context.Context, fleet, status string, limit int) ([]wire.JobSummary, error) {
	v, err := o.s.listJobs(ctx, fleet, job.Status(status), limit)
	return v, o.wireErr(ctx, err)
}

// Job is a job as GET /api/jobs/{job_id} answers it, with its estimate.
func (o consoleOps) Job(ctx context.Context, id string) (wire.Job, error) {
	j, err := o.s.Store.GetJob(ctx, id)
	if err != nil {
		return wire.Job{}, o.wireErr(ctx, err)
	}
	v := viewJob(j)
	o.s.withEstimate(ctx, &v, j)
	return v, nil
}

func (o consoleOps) Cancel(ctx context.Context, operator, id string) (string, error) {
	st, err := o.s.cancelJob(ctx, operator, id)
	return string(st), o.wireErr(ctx, err)
}

func (o consoleOps) Retry(ctx context.Context, operator, id string) (string, error) {
	j, err := o.s.retryDead(ctx, operator, id)
	return string(j.Status), o.wireErr(ctx, err)
}

func (o consoleOps) Drain(ctx context.Context, operator, id string) (wire.Worker, error) {
	wk, err := o.s.drainWorker(ctx, operator, id)
	if err != nil {
		return wire.Worker{}, o.wireErr(ctx, err)
	}
	return viewWorker(wk), nil
}

func (o consoleOps) Keys(ctx context.Context, tenant string) ([]wire.APIKey, error) {
	v, err := o.s.tenantKeys(ctx, tenant)
	return v, o.wireErr(ctx, err)
}

func (o consoleOps) CreateKey(ctx context.Context, operator string, req wire.CreateKeyRequest) (string, wire.APIKey, error) {
	key, k, err := o.s.newKey(ctx, operator, req)
	if err != nil {
		return "", wire.APIKey{}, o.wireErr(ctx, err)
	}
	return key, viewKey(k, o.s.Clock.Now()), nil
}

func (o consoleOps) RevokeKey(ctx context.Context, operator, id string) (wire.APIKey, error) {
	k, err := o.s.revokeKeyID(ctx, operator, id)
	if err != nil {
		return wire.APIKey{}, o.wireErr(ctx, err)
	}
	return viewKey(k, o.s.Clock.Now()), nil
}

// wireErr maps a store or validation error to the contract's error (nil
// stays nil), logging the unexpected ones as writeError does.
func (o consoleOps) wireErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	e := toError(err)
	if e.Status >= 500 {
		o.s.log.ErrorContext(ctx, "console request failed", "error", err.Error())
	}
	return e
}

func (s *server) serveConsole(w http.ResponseWriter, r *http.Request) { s.console.ServeHTTP(w, r) }

// consoleSession signs an operator console login for the operator who asks.
func (s *server) consoleSession(w http.ResponseWriter, r *http.Request) {
	var req wire.Empty
	if err := readBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	path, exp, err := s.console.NewLogin(r.Context(), operatorOf(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.ConsoleSessionResponse{Path: path, ExpiresAt: rfc3339(exp)})
}

// endConsoleSessions ends every console session of the operator who asks
// ("sign out everywhere" without a browser: a lost laptop, a copied cookie).
func (s *server) endConsoleSessions(w http.ResponseWriter, r *http.Request) {
	var req wire.Empty
	if err := readBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	who := operatorOf(r)
	if _, err := s.console.EndSessions(r.Context(), who); err != nil {
		s.writeError(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.ConsoleSessionsEnded{Operator: who})
}
