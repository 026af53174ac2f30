package scaler

import (
	"context"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/eta"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// Metric windows.
const (
	processingWindow = 10 * time.Minute
	errorWindow      = 5 * time.Minute
)

// FleetMetrics are the numbers published per fleet per tick (namespace
// fleetq, dimensions Stage and FleetSlug).
type FleetMetrics struct {
	QueueDepth             int     // ready + leased
	Queued                 int     // ready + delayed
	Leased                 int     //
	BacklogPerInstance     float64 // (ready + leased) / in service (0 in service: the backlog)
	ActiveWorkers          int     // active, responsive workers
	AvailableCapacity      int     // free slots of active workers
	DesiredCapacity        int     //
	InService              int     //
	OldestQueuedAgeSeconds float64 //
	JobProcessingP50       float64 // seconds, succeeded jobs of the last 10 minutes
	ErrorRate              float64 // percent of jobs ending dead in the last 5 minutes
	LeaseExpiredCount      int     // leases swept this tick
	SpotInterruptionCount  int     // interruptions since the previous tick
	UnhealthyWorkers       int     // workers that reported their machine sick (a GPU, a runner down), not yet replaced
}

func (s *Scaler) fleetMetrics(ctx context.Context, f *fleetconfig.Fleet, r FleetReport, workers []worker.Worker, now time.Time) (FleetMetrics, error) {
	snap := r.Snapshot
	m := FleetMetrics{
		QueueDepth:        snap.Ready + snap.Leased,
		Queued:            snap.Ready + snap.Delayed,
		Leased:            snap.Leased,
		DesiredCapacity:   r.Desired,
		InService:         r.InService(),
		LeaseExpiredCount: r.Swept.Leases.Requeued + r.Swept.Leases.Dead,
	}
	m.BacklogPerInstance = float64(m.QueueDepth) / float64(max(1, m.InService))
	unresponsive := 3 * f.HeartbeatInterval()
	for _, w := range workers {
		if w.Status == worker.Unhealthy {
			m.UnhealthyWorkers++
		}
		if w.Status == worker.Active && now.Sub(w.LastSeenAt) <= unresponsive {
			m.ActiveWorkers++
			m.AvailableCapacity += max(0, w.MaxConcurrency-w.Leases)
		}
	}
	if !snap.OldestReady.IsZero() {
		m.OldestQueuedAgeSeconds = now.Sub(snap.OldestReady).Seconds()
	}
	done, err := s.store.RecentOutcomes(ctx, f.Slug, now.Add(-processingWindow))
	if err != nil {
		return m, err
	}
	if len(done.Runs) > 0 {
		m.JobProcessingP50 = done.Runs[(len(done.Runs)-1)/2].Seconds()
	}
	recent, err := s.store.RecentOutcomes(ctx, f.Slug, now.Add(-errorWindow))
	if err != nil {
		return m, err
	}
	if n := recent.Succeeded + recent.Dead; n > 0 {
		m.ErrorRate = 100 * float64(recent.Dead) / float64(n)
	}
	if s.c.Interruptions != nil {
		if m.SpotInterruptionCount, err = s.c.Interruptions(ctx, f.Slug, now.Add(-time.Minute)); err != nil {
			return m, err
		}
	}
	return m, nil
}

// BootWindow is how far back the boot-phase metrics look: they cover the
// fleet's workers registered within it.
const BootWindow = time.Hour

// bootTimeline is the boot timeline of the fleet's workers registered
// within BootWindow.
func (s *Scaler) bootTimeline(ctx context.Context, workers []worker.Worker, now time.Time) worker.Timeline {
	return worker.BootTimeline(s.registeredSince(ctx, workers, now.Add(-BootWindow)))
}

// registeredSince reads the workers registered at or after since in full.
// The listing leaves boot times out (the index does not carry them), so it
// reads each of those workers: a read per instance registered since,
// bounded by the fleet's launches. A worker gone since the listing, or
// unreadable, is left out.
func (s *Scaler) registeredSince(ctx context.Context, workers []worker.Worker, since time.Time) []worker.Worker {
	var recent []worker.Worker
	for _, w := range workers {
		if w.RegisteredAt.IsZero() || w.RegisteredAt.Before(since) {
			continue
		}
		full, err := s.store.GetWorker(ctx, w.ID)
		if err != nil {
			continue
		}
		recent = append(recent, full)
	}
	return recent
}

// latestBoots are the fleet's latest boots after this tick: those it kept,
// then those of the workers registered since the last tick (within
// BootWindow), for the estimates of its queued jobs' starts.
func (s *Scaler) latestBoots(ctx context.Context, snap snapshot) []time.Duration {
	since := snap.now.Add(-BootWindow)
	if last, ok := snap.state.LastTick(); ok && last.At.After(since) {
		since = last.At.Add(time.Millisecond)
	}
	return fleetstate.WithBoots(snap.state.Boots, eta.Boots(s.registeredSince(ctx, snap.workers, since)))
}

func (s *Scaler) emitMetrics(ctx context.Context, f *fleetconfig.Fleet, r FleetReport, workers []worker.Worker, now time.Time) error {
	if s.c.Metrics == nil {
		return nil
	}
	m, err := s.fleetMetrics(ctx, f, r, workers, now)
	if err != nil {
		return err
	}
	// The boot phases first: the fleet's own line stays its tick's last.
	if err := writeBootEMF(s.c.Metrics, s.c.Stage, f.Slug, s.bootTimeline(ctx, workers, now), now); err != nil {
		return err
	}
	return writeEMF(s.c.Metrics, s.c.Stage, f.Slug, m, now)
}
