package scaler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// StaleWorkerAfter is how long a worker may go unseen before the tick
// removes its record (its instance is long gone).
const StaleWorkerAfter = 2 * time.Hour

// Relay drains the job-event outbox (jobevents.Relay).
type Relay interface {
	Drain(ctx context.Context) (int, error)
}

// Scaler runs the tick.
type Scaler struct {
	Store    *store.Store
	Capacity Capacity
	Clock    Clock
	Logger   *slog.Logger
	// Stage names the deployment in metrics.
	Stage string
	// Metrics receives one CloudWatch Embedded Metric Format line per fleet
	// per tick (os.Stdout in Lambda); nil writes none.
	Metrics io.Writer
	// Relay, when set, publishes job events the API could not announce.
	Relay Relay
	// Interruptions, when set, counts a fleet's Spot interruptions since a
	// time (for the SpotInterruptionCount metric).
	Interruptions func(ctx context.Context, fleet string, since time.Time) (int, error)
}

// FleetReport is what one tick did for one fleet.
type FleetReport struct {
	Fleet        string
	Promoted     int
	QueueExpired int
	Swept        store.SweepResult
	Reconciled   int
	Removed      int
	Decision     scaling.Decision
	// Desired is the group's desired capacity the tick left.
	Desired int
	// Terminated are the instances terminated; Kept are victims that took
	// work before they could be drained and were left running.
	Terminated []string
	Kept       []string
	Snapshot   fleetstate.Snapshot
	Group      Group
}

// Tick runs one pass over every fleet. A failing fleet does not stop the
// others; the errors are joined.
func (s *Scaler) Tick(ctx context.Context) ([]FleetReport, error) {
	var reports []FleetReport
	var errs []error
	for i := range s.Store.Config().Fleets {
		f := &s.Store.Config().Fleets[i]
		r, err := s.TickFleet(ctx, f)
		if err != nil {
			s.log().Error("scaler tick failed", "fleet", f.Slug, "error", err.Error())
			errs = append(errs, fmt.Errorf("fleet %s: %w", f.Slug, err))
			continue
		}
		reports = append(reports, r)
	}
	if s.Relay != nil {
		if _, err := s.Relay.Drain(ctx); err != nil {
			errs = append(errs, fmt.Errorf("relay job events: %w", err))
		}
	}
	return reports, errors.Join(errs...)
}

// TickFleet runs the tick for one fleet. Each step is safe to cut short: the
// next tick starts again from what the store and the group say.
func (s *Scaler) TickFleet(ctx context.Context, f *fleetconfig.Fleet) (FleetReport, error) {
	r := FleetReport{Fleet: f.Slug}
	st := s.Store
	var err error
	if r.Promoted, err = st.PromoteDue(ctx, f.Slug); err != nil {
		return r, err
	}
	if r.QueueExpired, err = st.ExpireQueueTimeouts(ctx, f.Slug); err != nil {
		return r, err
	}
	if r.Swept, err = st.SweepExpiredLeases(ctx, f.Slug); err != nil {
		return r, err
	}
	now := s.Clock.Now()
	if r.Removed, err = st.RemoveStaleWorkers(ctx, f.Slug, now.Add(-StaleWorkerAfter)); err != nil {
		return r, err
	}
	if r.Snapshot, err = st.FleetSnapshot(ctx, f.Slug); err != nil {
		return r, err
	}
	if r.Reconciled, err = st.ReconcileLeaseCounts(ctx, f.Slug, r.Snapshot.LeasesByWorker); err != nil {
		return r, err
	}
	workers, err := st.ListWorkers(ctx, f.Slug)
	if err != nil {
		return r, err
	}
	state, err := st.GetFleetState(ctx, f.Slug)
	if err != nil {
		return r, err
	}
	if s.Capacity != nil {
		if r.Group, err = s.Capacity.Describe(ctx, f.Slug); err != nil {
			return r, err
		}
	}

	in := scaling.Input{
		Now: now, Settings: scaling.SettingsOf(f),
		Ready: r.Snapshot.Ready, Leased: r.Snapshot.Leased,
		Desired: r.Group.Desired, LastActiveAt: state.LastActiveAt,
	}
	firstSeen := map[string]time.Time{}
	for _, inst := range r.Group.Instances {
		seen, ok := state.FirstSeen[inst.ID]
		if !ok {
			seen = now
		}
		firstSeen[inst.ID] = seen
		inst.FirstSeen = seen
		in.Instances = append(in.Instances, inst)
	}
	status := map[string]worker.Status{}
	for _, w := range workers {
		status[w.ID] = w.Status
		in.Workers = append(in.Workers, scaling.Worker{
			ID: w.ID, InstanceID: w.InstanceID, Leases: w.Leases,
			Draining: w.Status != worker.Active, LastSeen: w.LastSeenAt, IdleSince: w.IdleSince(),
		})
	}
	d := scaling.Decide(in)
	r.Decision = d
	if s.Capacity == nil {
		// No capacity attached (workers started by hand): keep the books
		// and record what the policy would do.
		d.Reason = "advisory, no capacity attached: " + d.Reason
		r.Decision, r.Desired = d, d.Desired
		return r, s.record(ctx, f, r, d, d.Reason, firstSeen, workers, now)
	}

	// Scale in: claim each victim with the conditional drain (it holds only
	// while the worker has no lease), then terminate it, lowering desired.
	desired := r.Group.Desired
	for _, v := range d.Victims {
		if v.WorkerID != "" && status[v.WorkerID] != worker.Revoked {
			if err := st.DrainIdleWorker(ctx, v.WorkerID); err != nil {
				if !errors.Is(err, store.ErrConflict) {
					return r, err
				}
				r.Kept = append(r.Kept, v.InstanceID)
				continue
			}
		}
		if err := s.Capacity.Terminate(ctx, f.Slug, v.InstanceID); err != nil {
			// The worker stays drained; the next tick sees it as a drained
			// victim and tries again.
			s.log().Warn("terminate failed", "fleet", f.Slug, "instance_id", v.InstanceID, "error", err.Error())
			r.Kept = append(r.Kept, v.InstanceID)
			continue
		}
		desired--
		delete(firstSeen, v.InstanceID)
		r.Terminated = append(r.Terminated, v.InstanceID)
		if v.WorkerID != "" {
			if _, err := st.RemoveWorker(ctx, v.WorkerID, "scale_in"); err != nil && !errors.Is(err, store.ErrNotFound) {
				s.log().Warn("remove terminated worker", "worker_id", v.WorkerID, "error", err.Error())
			}
		}
	}
	// Victims that were kept still occupy the group.
	r.Desired = d.Desired + len(r.Kept)
	if r.Desired != desired {
		if err := s.Capacity.SetDesired(ctx, f.Slug, r.Desired); err != nil {
			return r, err
		}
	}

	reason := d.Reason
	if len(r.Kept) > 0 {
		reason += fmt.Sprintf("; %d victim(s) kept: took work or could not be terminated", len(r.Kept))
	}
	return r, s.record(ctx, f, r, d, reason, firstSeen, workers, now)
}

// record stores the decision, logs it and emits the fleet's metrics.
func (s *Scaler) record(ctx context.Context, f *fleetconfig.Fleet, r FleetReport, d scaling.Decision, reason string, firstSeen map[string]time.Time, workers []worker.Worker, now time.Time) error {
	rec := fleetstate.Decision{
		At: now, Desired: r.Desired, Reason: reason, InService: r.Group.InService(),
		Victims: victimNames(d.Victims),
		Inputs: map[string]int{
			"ready": d.Counts.Ready, "leased": d.Counts.Leased, "delayed": r.Snapshot.Delayed,
			"need": d.Counts.Need, "instances": d.Counts.Instances, "booting": d.Counts.Booting,
			"busy": d.Counts.Busy, "idle": d.Counts.Idle, "draining": d.Counts.Draining,
			"unresponsive": d.Counts.Unresponsive, "unhealthy": d.Counts.Unhealthy,
		},
	}
	if err := s.Store.RecordDecision(ctx, f.Slug, fleetstate.Record{Decision: rec, LastActiveAt: d.LastActiveAt, FirstSeen: firstSeen}); err != nil {
		return err
	}
	s.log().Info("scaling decision", "fleet", f.Slug, "desired", r.Desired, "reason", reason,
		"terminated", strings.Join(r.Terminated, ","), "swept_requeued", r.Swept.Requeued, "swept_dead", r.Swept.Dead)
	if err := s.emitMetrics(ctx, f, r, workers, now); err != nil {
		s.log().Warn("metrics", "fleet", f.Slug, "error", err.Error())
	}
	return nil
}

func victimNames(vs []scaling.Victim) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.InstanceID+" ("+v.Why+")")
	}
	return out
}

func (s *Scaler) log() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
