package api

import (
	"net/http"
	"strconv"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// Producers' listing of their own jobs: its page size.
const (
	defaultOwnJobsLimit = 20
	maxOwnJobsLimit     = 100
)

// listOwnJobs is GET /api/jobs: one page of the caller's tenant's jobs
// (an operator names the tenant in tenant_id), optionally of one status.
// The store reads one page of the state index and keeps the tenant's
// entries, so a page may be short and still have a next_cursor.
func (s *server) listOwnJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tenantID, err := tenantFor(callerOf(r), "tenant_id", q.Get("tenant_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := job.Status(q.Get("status"))
	if status != "" && !status.Valid() {
		s.writeError(w, r, invalid("query \"status\": must be accepted, queued, leased, succeeded, dead or canceled, or absent for every status"))
		return
	}
	limit := defaultOwnJobsLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxOwnJobsLimit {
			s.writeError(w, r, invalid("query \"limit\": must be between 1 and %d", maxOwnJobsLimit))
			return
		}
		limit = n
	}
	fleets, err := s.fleetsNamed("")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	slugs := make([]string, 0, len(fleets))
	for _, f := range fleets {
		slugs = append(slugs, f.Slug)
	}
	page, next, err := s.Store.ListTenantJobs(r.Context(), tenantID, slugs, status, limit, q.Get("cursor"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := wire.JobsResponse{Jobs: make([]wire.JobSummary, 0, len(page)), NextCursor: next}
	for _, j := range page {
		v := summaryOf(j)
		s.summaryEstimate(r.Context(), &v, j)
		out.Jobs = append(out.Jobs, v)
	}
	wire.WriteJSON(w, http.StatusOK, out)
}

// summaryOf is a listed job as the API shows it.
func summaryOf(j job.Summary) wire.JobSummary {
	return wire.JobSummary{JobID: j.ID, TenantID: j.TenantID, WorkflowID: j.WorkflowID, FleetSlug: j.Fleet,
		Status: string(j.Status), Reason: string(j.Reason), ErrorCode: j.ErrorCode, Attempts: j.Attempts, Preemptions: j.Preemptions, UpdatedAt: rfc3339(j.UpdatedAt)}
}
