package api

import (
	"context"
	"sync"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/eta"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// EstimateStore reads the snapshot of one fleet that its queued jobs'
// estimates are projected from (eta.Snapshot).
type EstimateStore interface {
	EstimateSnapshot(ctx context.Context, fleet string) (eta.Snapshot, error)
}

// EstimateTTL is how long a process keeps a fleet's projected estimates,
// so that many reads of one fleet's jobs cost one snapshot every few
// seconds. A queued job missing from them reads the fleet again at once
// when it changed since the snapshot, or within EstimateLag before it (the
// index may not have shown it yet); one missing longer waits for the TTL.
const (
	EstimateTTL = 5 * time.Second
	EstimateLag = time.Second
)

// estimates are the projected estimates of each fleet, per process.
type estimates struct {
	read  func(ctx context.Context, fleet string) (eta.Snapshot, error)
	clock clock.Clock
	mu    sync.Mutex
	fleet map[string]*fleetEstimates
}

// fleetEstimates is one fleet's projection. Its lock is held while one
// request reads and projects, so concurrent requests wait for that answer
// instead of reading the fleet too.
type fleetEstimates struct {
	mu    sync.Mutex
	at    time.Time
	byJob map[string]eta.Estimate
	// behind: the snapshot left out the queue's tail, after held jobs.
	behind bool
	held   int
}

func newEstimates(st EstimateStore, clk clock.Clock) *estimates {
	return &estimates{read: st.EstimateSnapshot, clock: clk, fleet: map[string]*fleetEstimates{}}
}

// of answers a queued job's estimate, and whether there is one (a job
// the fleet's snapshot does not hold as queued has none); changed is when
// the job last changed.
func (e *estimates) of(ctx context.Context, fleet, jobID string, changed time.Time) (eta.Estimate, bool, error) {
	e.mu.Lock()
	f := e.fleet[fleet]
	if f == nil {
		f = &fleetEstimates{}
		e.fleet[fleet] = f
	}
	e.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	now := e.clock.Now()
	if est, ok := f.byJob[jobID]; f.byJob != nil && now.Sub(f.at) < EstimateTTL && (ok || changed.Before(f.at.Add(-EstimateLag))) {
		return f.orBehind(jobID, est, ok)
	}
	snap, err := e.read(ctx, fleet)
	if err != nil {
		return eta.Estimate{}, false, err
	}
	all := eta.Project(snap, now)
	f.at, f.byJob = now, make(map[string]eta.Estimate, len(all))
	f.behind, f.held = snap.Beyond > 0, len(snap.Queued)
	for _, x := range all {
		f.byJob[x.JobID] = x
	}
	est, ok := f.byJob[jobID]
	return f.orBehind(jobID, est, ok)
}

// orBehind is a job's estimate, or when the snapshot left the queue's tail
// out and the job is not in it, that it is behind those it holds (the
// caller asks only of a job its record says is queued).
func (f *fleetEstimates) orBehind(jobID string, est eta.Estimate, ok bool) (eta.Estimate, bool, error) {
	if !ok && f.behind {
		return eta.Behind(jobID, f.held), true, nil
	}
	return est, ok, nil
}

// estimateOf is a queued job's estimate, if its fleet's projection has
// one. The estimate is an answer's extra: when it cannot be read, the job
// is answered without one and the error is logged.
func (s *server) estimateOf(ctx context.Context, fleet, jobID string, changed time.Time) (eta.Estimate, bool) {
	est, ok, err := s.estimates.of(ctx, fleet, jobID, changed)
	if err != nil {
		s.log.WarnContext(ctx, "estimate", "job_id", jobID, "fleet", fleet, "error", err.Error())
	}
	return est, ok && err == nil
}

// withEstimate adds a queued job's estimate to its view.
func (s *server) withEstimate(ctx context.Context, v *wire.Job, j job.Job) {
	if j.Status != job.Queued {
		return
	}
	if est, ok := s.estimateOf(ctx, j.FleetSlug, j.ID, j.UpdatedAt); ok {
		v.EstimatedStartAt, v.EstimateBasis, v.Position = rfc3339(est.StartAt), string(est.Basis), est.Position
		v.WaitingOn = &wire.WaitingOn{Code: string(est.WaitingOn.Code), Params: est.WaitingOn.Params, Text: est.WaitingOn.Text}
	}
}

// summaryEstimate adds a listed queued job's expected start to its entry.
func (s *server) summaryEstimate(ctx context.Context, v *wire.JobSummary, j job.Summary) {
	if j.Status != job.Queued {
		return
	}
	if est, ok := s.estimateOf(ctx, v.FleetSlug, v.JobID, j.UpdatedAt); ok {
		v.EstimatedStartAt = rfc3339(est.StartAt)
	}
}
