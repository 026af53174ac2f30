package scaler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fairshare"
	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/lease"
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

// Store is what the tick needs of the store.
type Store interface {
	Sweep(ctx context.Context, fleet string) (lease.Swept, error)
	FleetSnapshot(ctx context.Context, fleet string) (fleetstate.Snapshot, error)
	ListWorkers(ctx context.Context, fleet string) ([]worker.Worker, error)
	GetWorker(ctx context.Context, id string) (worker.Worker, error)
	GetFleetState(ctx context.Context, fleet string) (fleetstate.State, error)
	RemoveStaleWorkers(ctx context.Context, workers []worker.Worker, cutoff time.Time) ([]string, error)
	ReconcileLeaseCounts(ctx context.Context, workers []worker.Worker, held map[string]int) (int, error)
	DrainIdleWorker(ctx context.Context, id string) error
	DrainWorker(ctx context.Context, id string) (worker.Worker, error)
	RemoveIdleWorker(ctx context.Context, w worker.Worker) error
	RecordDecision(ctx context.Context, fleet string, r fleetstate.Record, prev fleetstate.State) error
	RecentOutcomes(ctx context.Context, fleet string, since time.Time) (fleetstate.Outcomes, error)
	PoolStore
}

// Scaler runs the tick. Build it with New.
type Scaler struct {
	cfg   *fleetconfig.Config
	store Store
	clock Clock
	log   *slog.Logger
	c     Config
}

// Config holds the scaler's optional settings; the zero Config is the
// defaults.
type Config struct {
	// Capacity is the fleets' groups (default: none, which keeps the books
	// only, for workers started by hand, and records what the policy would
	// do).
	Capacity Capacity
	// Stage names the deployment in metrics (default: the fleet config's
	// stage).
	Stage string
	// Metrics receives one CloudWatch Embedded Metric Format line per fleet
	// per tick (os.Stdout in Lambda; default: none).
	Metrics io.Writer
	// Relay publishes job events the API could not announce (default:
	// none).
	Relay Relay
	// Interruptions counts a fleet's Spot interruptions since a time, for
	// the SpotInterruptionCount metric (default: not published).
	Interruptions func(ctx context.Context, fleet string, since time.Time) (int, error)
	// InterruptionCounts reads a fleet's interruptions since a time by
	// instance type, zone and kind, to weigh down the Spot types and zones
	// interrupted recently (weigh.go; default: no weighing).
	InterruptionCounts func(ctx context.Context, fleet string, since time.Time) ([]fleetstate.InterruptionCount, error)
	// SpotPrices reads each fleet's Spot prices about once an hour for the
	// cost of its jobs (NewSpotPricer; default: none).
	SpotPrices *SpotPricer
}

// New returns the tick over the fleets of cfg. Every argument but the
// Config is required: New answers an error naming the one missing.
func New(cfg *fleetconfig.Config, st Store, clk Clock, log *slog.Logger, c Config) (*Scaler, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("scaler.New: no config")
	case st == nil:
		return nil, errors.New("scaler.New: no store")
	case clk == nil:
		return nil, errors.New("scaler.New: no clock")
	case log == nil:
		return nil, errors.New("scaler.New: no logger")
	}
	if c.Stage == "" {
		c.Stage = cfg.Stage
	}
	return &Scaler{cfg: cfg, store: st, clock: clk, log: log, c: c}, nil
}

// FleetReport is what one tick did for one fleet.
type FleetReport struct {
	Fleet      string
	Swept      lease.Swept
	Reconciled int
	Removed    int
	// Decision is the policy's decision; its Reason is the policy's alone.
	Decision scaling.Decision
	// Reason is the tick's one-line reason, as recorded with the decision:
	// the policy's, with what applying it and the rest of the tick added
	// (reasonParts).
	Reason scaling.Reason
	// Desired is the group's desired capacity the tick left.
	Desired int
	// Terminated are the instances terminated; Kept are victims that took
	// work before they could be drained and were left running.
	Terminated []string
	Kept       []string
	Snapshot   fleetstate.Snapshot
	Group      Group
	// Ladder is set for a fleet with an On-Demand rung (ladder.go).
	Ladder *LadderReport
	// Weighing is set for a fleet whose Spot group was weighed (weigh.go).
	Weighing *WeighReport
	// Pool is set for a fleet that runs a stopped Spot pool (spotpool.go).
	Pool *PoolReport
}

// InService counts the fleet's instances in service: its group's, and its
// On-Demand group's for a fleet with the rung.
func (r FleetReport) InService() int {
	n := r.Group.InService()
	if r.Ladder != nil {
		n += r.Ladder.OnDemand.InService()
	}
	return n
}

// Tick runs one pass over every fleet. A failing fleet does not stop the
// others; the errors are joined.
func (s *Scaler) Tick(ctx context.Context) ([]FleetReport, error) {
	var reports []FleetReport
	var errs []error
	for i := range s.cfg.Fleets {
		f := &s.cfg.Fleets[i]
		r, err := s.TickFleet(ctx, f)
		if err != nil {
			s.log.Error("scaler tick failed", "fleet", f.Slug, "error", err.Error())
			errs = append(errs, fmt.Errorf("fleet %s: %w", f.Slug, err))
			continue
		}
		reports = append(reports, r)
	}
	s.refreshSpotPrices(ctx)
	if s.c.Relay != nil {
		if _, err := s.c.Relay.Drain(ctx); err != nil {
			errs = append(errs, fmt.Errorf("relay job events: %w", err))
		}
	}
	return reports, errors.Join(errs...)
}

// TickFleet runs the tick for one fleet: housekeeping of its jobs, one
// snapshot of its backlog, workers, state and group, then the steps that
// work from it — remove stale workers, reconcile lease counts, decide,
// apply, record, publish. Each step is safe to cut short: the next tick
// starts again from what the store and the group say.
func (s *Scaler) TickFleet(ctx context.Context, f *fleetconfig.Fleet) (FleetReport, error) {
	r := FleetReport{Fleet: f.Slug}
	if err := s.housekeep(ctx, f, &r); err != nil {
		return r, err
	}
	snap, err := s.read(ctx, f)
	if err != nil {
		return r, err
	}
	r.Snapshot, r.Group = snap.backlog, snap.group
	if err := s.removeStale(ctx, &snap, &r); err != nil {
		return r, err
	}
	if s.c.Capacity == nil {
		snap.group = registered(snap.workers)
		r.Group = snap.group
	}
	if r.Reconciled, err = s.store.ReconcileLeaseCounts(ctx, snap.workers, snap.backlog.LeasesByWorker); err != nil {
		return r, err
	}
	p := plan(f, snap)
	why := reasonParts{capHeld: p.capHeld, ready: snap.backlog.Ready}
	if s.c.Capacity != nil {
		if err := s.tickPool(ctx, f, snap, &p, &r); err != nil {
			return r, err
		}
	}
	if useBridge(f, snap) {
		why.policy, err = s.tickBridge(ctx, f, snap, &p, &r)
	} else if snap.ladder != nil {
		why.policy, err = s.tickLadder(ctx, f, snap, &p, &r)
	} else {
		r.Decision = scaling.Decide(p.input)
		why.policy, why.advisory, err = r.Decision.Reason, s.c.Capacity == nil, s.apply(ctx, f, snap, p, &r)
	}
	if err != nil {
		return r, err
	}
	why.kept = len(r.Kept)
	if r.Pool != nil {
		why.pool = r.Pool.Decision.Reason
	}
	if s.c.Capacity != nil {
		// Best effort: a tick that cannot weigh still records its decision.
		w, err := s.weigh(ctx, f, snap)
		if err != nil {
			s.log.Warn("weigh spot types and zones", "fleet", f.Slug, "error", err.Error())
		}
		if r.Weighing = w; w != nil {
			why.weighed = w.Reason
		}
	}
	r.Reason = why.reason()
	if err := s.record(ctx, f, snap, p, r); err != nil {
		return r, err
	}
	s.publish(ctx, f, snap, r)
	return r, nil
}

// housekeep moves the fleet's jobs along before the snapshot is read: the
// sweeper's steps (lease.Sweeper) on every job due. Retries whose backoff
// passed become ready, queued jobs past their deadline end, run-out leases
// end. The tick is their owner: a poll runs two of the same steps on a
// few jobs only when it found nothing ready.
func (s *Scaler) housekeep(ctx context.Context, f *fleetconfig.Fleet, r *FleetReport) error {
	var err error
	r.Swept, err = s.store.Sweep(ctx, f.Slug)
	return err
}

// snapshot is what a tick reads of a fleet, once: every later step works
// from it.
type snapshot struct {
	now     time.Time
	backlog fleetstate.Snapshot
	workers []worker.Worker
	state   fleetstate.State
	group   Group
	// ladder is the fleet's On-Demand group and Spot shortage, for a fleet
	// with the rung on capacity that has one.
	ladder *ladderSnapshot
	// tenant answers a tenant's settings (its max_leased cap).
	tenant func(string) fleetconfig.Tenant
}

// read takes the fleet's snapshot.
func (s *Scaler) read(ctx context.Context, f *fleetconfig.Fleet) (snapshot, error) {
	snap := snapshot{now: s.clock.Now()}
	var err error
	if snap.backlog, err = s.store.FleetSnapshot(ctx, f.Slug); err != nil {
		return snap, err
	}
	snap.tenant = s.cfg.Tenant
	if snap.workers, err = s.store.ListWorkers(ctx, f.Slug); err != nil {
		return snap, err
	}
	seenByLeases(&snap)
	if snap.state, err = s.store.GetFleetState(ctx, f.Slug); err != nil {
		return snap, err
	}
	if s.c.Capacity != nil {
		if snap.group, err = s.c.Capacity.Describe(ctx, f.Slug); err != nil {
			return snap, err
		}
		if snap.ladder, err = s.readLadder(ctx, f, snap.group); err != nil {
			return snap, err
		}
	}
	return snap, nil
}

// registered is the fleet's group when no capacity is attached: its
// workers were started by hand, so each machine a worker registered from
// (its instance id; several workers of one machine share it) is an
// instance in service, and the policy counts its workers busy or idle as
// it does those of a group's instances.
func registered(workers []worker.Worker) Group {
	var g Group
	seen := make(map[string]bool, len(workers))
	for _, w := range workers {
		if w.InstanceID == "" || seen[w.InstanceID] {
			continue
		}
		seen[w.InstanceID] = true
		g.Instances = append(g.Instances, scaling.Instance{ID: w.InstanceID, LifecycleState: scaling.StateInService})
	}
	g.Desired = len(g.Instances)
	return g
}

// seenByLeases marks seen now every worker that holds a lease in the
// snapshot. A heartbeat writes only its job (the worker's last_seen_ms is
// written by polls, claims and reports), and the housekeeping before the
// snapshot ended every lease whose worker stopped heartbeating for the
// fleet's lease time: a lease still held is a worker still alive. A busy
// worker that dies is therefore found when its lease runs out, and its
// last_seen_ms tells the rest.
func seenByLeases(snap *snapshot) {
	for i, w := range snap.workers {
		if snap.backlog.LeasesByWorker[w.ID] > 0 && w.LastSeenAt.Before(snap.now) {
			snap.workers[i].LastSeenAt = snap.now
		}
	}
}

// removeStale removes the workers unseen for StaleWorkerAfter (their
// instances are long gone) and drops them from the snapshot.
func (s *Scaler) removeStale(ctx context.Context, snap *snapshot, r *FleetReport) error {
	removed, err := s.store.RemoveStaleWorkers(ctx, snap.workers, snap.now.Add(-StaleWorkerAfter))
	r.Removed = len(removed)
	if err != nil || len(removed) == 0 {
		return err
	}
	gone := make(map[string]bool, len(removed))
	for _, id := range removed {
		gone[id] = true
	}
	kept := snap.workers[:0:0]
	for _, w := range snap.workers {
		if !gone[w.ID] {
			kept = append(kept, w)
		}
	}
	snap.workers = kept
	return nil
}

// decisionPlan is the policy's input built from a snapshot, and when each
// instance of the group was first seen (carried to the next tick).
type decisionPlan struct {
	input     scaling.Input
	firstSeen map[string]time.Time
	// workers are the snapshot's workers by id.
	workers map[string]worker.Worker
	// forecast is the forecast's memory with this tick's sample, and the
	// interval the tick books against its budget (nil: no forecast).
	forecast         *fleetstate.Forecast
	forecastInterval time.Duration
	// capHeld is how many ready jobs the tenants' max_leased caps keep from
	// running now: the policy does not size for them.
	capHeld int
}

// plan builds the scaling policy's input from a snapshot.
func plan(f *fleetconfig.Fleet, snap snapshot) decisionPlan {
	p := decisionPlan{
		input: scaling.Input{
			Now: snap.now, Settings: scaling.SettingsOf(f),
			Ready: snap.backlog.Ready, Leased: snap.backlog.Leased,
			Desired: snap.group.Desired, LastActiveAt: snap.state.LastActiveAt,
		},
		firstSeen: map[string]time.Time{},
		workers:   map[string]worker.Worker{},
		capHeld:   capHeld(snap),
	}
	p.input.Ready -= p.capHeld
	for _, inst := range snap.group.Instances {
		seen, ok := snap.state.FirstSeen[inst.ID]
		if !ok {
			seen = snap.now
		}
		p.firstSeen[inst.ID] = seen
		inst.FirstSeen = seen
		p.input.Instances = append(p.input.Instances, inst)
	}
	for _, w := range snap.workers {
		p.workers[w.ID] = w
		p.input.Workers = append(p.input.Workers, scaling.Worker{
			ID: w.ID, InstanceID: w.InstanceID, Leases: w.Leases,
			Draining: w.Status != worker.Active, LastSeen: w.LastSeenAt, IdleSince: w.IdleSince(),
		})
	}
	p.forecast, p.forecastInterval = planForecast(f, snap, &p.input)
	return p
}

// capHeld answers how many of the fleet's ready jobs the tenants'
// max_leased caps keep from running now: the backlog less the work the caps
// allow (fairshare.Demand), 0 when no tenant is capped. The scaler sizes
// capacity to what can run, not to a capped tenant's whole backlog.
func capHeld(snap snapshot) int {
	b := snap.backlog
	if b.ReadyByTenant == nil || snap.tenant == nil {
		return 0
	}
	var ts []fairshare.Tenant
	for id, n := range b.ReadyByTenant {
		ts = append(ts, fairshare.Tenant{ID: id, MaxLeased: snap.tenant(id).MaxLeased, Ready: n, Leased: b.LeasedByTenant[id]})
	}
	for id, n := range b.LeasedByTenant {
		if _, ok := b.ReadyByTenant[id]; !ok {
			ts = append(ts, fairshare.Tenant{ID: id, MaxLeased: snap.tenant(id).MaxLeased, Leased: n})
		}
	}
	held := b.Ready + b.Leased - fairshare.Demand(ts)
	return min(max(held, 0), b.Ready)
}

// apply carries the decision out on the fleet's group. Scale-in claims
// each victim with the conditional drain (it holds only while the worker
// has no lease), then terminates it, lowering desired; victims that took
// work meanwhile, or that could not be terminated, are kept and still
// occupy the group. Without capacity it only says what the policy wants.
func (s *Scaler) apply(ctx context.Context, f *fleetconfig.Fleet, snap snapshot, p decisionPlan, r *FleetReport) error {
	d := r.Decision
	if s.c.Capacity == nil {
		r.Desired = d.Desired
		return nil
	}
	gone, err := s.retire(ctx, f, p, d.Victims, r)
	if err != nil {
		return err
	}
	desired := snap.group.Desired - len(gone)
	r.Desired = d.Desired + len(r.Kept)
	if r.Desired != desired {
		return s.c.Capacity.SetDesired(ctx, f.Slug, r.Desired)
	}
	return nil
}

// retire claims each victim with the conditional drain (it holds only
// while the worker has no lease), then terminates it, lowering its group's
// desired; victims that took work meanwhile, or that could not be
// terminated, go to r.Kept. It answers the instances terminated.
func (s *Scaler) retire(ctx context.Context, f *fleetconfig.Fleet, p decisionPlan, victims []scaling.Victim, r *FleetReport) ([]string, error) {
	var gone []string
	for _, v := range victims {
		if v.WorkerID != "" && p.workers[v.WorkerID].Status != worker.Revoked {
			if err := s.store.DrainIdleWorker(ctx, v.WorkerID); err != nil {
				if !errors.Is(err, fault.ErrConflict) {
					return gone, err
				}
				r.Kept = append(r.Kept, v.InstanceID)
				continue
			}
		}
		if err := s.end(ctx, f, v); err != nil {
			// The worker stays drained; the next tick sees it as a drained
			// victim and tries again.
			s.log.Warn("terminate failed", "fleet", f.Slug, "instance_id", v.InstanceID, "error", err.Error())
			r.Kept = append(r.Kept, v.InstanceID)
			continue
		}
		gone = append(gone, v.InstanceID)
		delete(p.firstSeen, v.InstanceID)
		r.Terminated = append(r.Terminated, v.InstanceID)
		if w, ok := p.workers[v.WorkerID]; ok {
			// Drained idle (or revoked, its leases given back then): it
			// holds no lease, so removing it reads nothing.
			if err := s.store.RemoveIdleWorker(ctx, w); err != nil {
				s.log.Warn("remove terminated worker", "worker_id", v.WorkerID, "error", err.Error())
			}
		}
	}
	return gone, nil
}

// record stores the decision with its inputs, on the state it was made
// from, and logs it.
func (s *Scaler) record(ctx context.Context, f *fleetconfig.Fleet, snap snapshot, p decisionPlan, r FleetReport) error {
	d := r.Decision
	rec := fleetstate.Decision{
		At: snap.now, Desired: r.Desired, Reason: r.Reason, InService: r.InService(),
		Victims: victimNames(d.Victims),
		Inputs:  fleetstate.NewTickInputs(d.Counts, snap.backlog.Delayed, p.capHeld),
	}
	if r.Ladder != nil {
		rec.Inputs.Ladder = r.Ladder.inputs()
	}
	if r.Weighing != nil {
		rec.Inputs.Weighing = r.Weighing.inputs()
	}
	var mem *fleetstate.Forecast
	if p.forecast != nil {
		// The instances the forecast added are booked for the tick's
		// interval against today's budget.
		m := *p.forecast
		m.Budget = m.Budget.Spend(snap.now, d.ForecastExtra, p.forecastInterval)
		mem = &m
		rec.Inputs.Forecast = &fleetstate.ForecastInputs{Instances: p.input.Forecast.Instances, Extra: d.ForecastExtra}
	}
	if err := s.store.RecordDecision(ctx, f.Slug, fleetstate.Record{Decision: rec, LastActiveAt: d.LastActiveAt, FirstSeen: p.firstSeen, Forecast: mem,
		Boots: s.latestBoots(ctx, snap)}, snap.state); err != nil {
		return err
	}
	s.log.Info("scaling decision", "fleet", f.Slug, "desired", r.Desired, "reason", r.Reason.String(), "reason_code", string(r.Reason.Code()),
		"terminated", strings.Join(r.Terminated, ","), "promoted", r.Swept.Promoted, "queue_expired", r.Swept.QueueExpired, "swept_requeued", r.Swept.Leases.Requeued, "swept_dead", r.Swept.Leases.Dead)
	return nil
}

// publish writes the fleet's metrics; a failure is logged, never fatal.
func (s *Scaler) publish(ctx context.Context, f *fleetconfig.Fleet, snap snapshot, r FleetReport) {
	if err := s.emitMetrics(ctx, f, r, snap.workers, snap.now); err != nil {
		s.log.Warn("metrics", "fleet", f.Slug, "error", err.Error())
	}
}

func victimNames(vs []scaling.Victim) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.InstanceID+" ("+v.Why+")")
	}
	return out
}
