package scaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// Waker scales a fleet from zero in the dispatch invocation that created its
// first work, without waiting for the next tick. Concurrent invocations are
// deduplicated by a conditional write on the fleet's state
// (store.WakeFleet), which also records the wake as the fleet's scaling
// decision: only the winner touches the group.
//
// A fleet with a bridge also starts bridge instances from its pool, in
// every invocation, for the ready jobs the free slots cannot take
// (scaling.BridgeStart): the store reads its ready jobs and workers for that,
// a snapshot of the live backlog and one query of the workers per batch,
// paid only by fleets with a bridge.
//
// A fleet with a Spot pool starts stopped pool instances first
// (scaling.PoolStart), in every invocation, for the ready jobs the free
// slots cannot take; only the jobs the pool does not take (a failed
// start's among them) raise the Spot group and start bridges.
type Waker struct {
	cfg      *fleetconfig.Config
	store    WakerStore
	capacity Capacity
	log      *slog.Logger
	clock    Clock
}

// WakerOption tunes a Waker.
type WakerOption func(*Waker)

// WakerClock dates the waker's pool starts and failures (default: the
// wall clock).
func WakerClock(c Clock) WakerOption { return func(w *Waker) { w.clock = c } }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// WakerStore is what the waker needs of the store.
type WakerStore interface {
	FleetWaker
	BridgeReader
	PoolStore
}

// NewWaker returns the waker of the fleets of cfg, raising their groups
// through capacity. Every argument is required: NewWaker answers an error
// naming the one missing.
func NewWaker(cfg *fleetconfig.Config, st WakerStore, capacity Capacity, log *slog.Logger, opts ...WakerOption) (*Waker, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("scaler.NewWaker: no config")
	case st == nil:
		return nil, errors.New("scaler.NewWaker: no store")
	case capacity == nil:
		return nil, errors.New("scaler.NewWaker: no capacity")
	case log == nil:
		return nil, errors.New("scaler.NewWaker: no logger")
	}
	w := &Waker{cfg: cfg, store: st, capacity: capacity, log: log, clock: wallClock{}}
	for _, o := range opts {
		o(w)
	}
	return w, nil
}

// BridgeReader reads what a bridge's wake needs: the fleet's ready jobs
// and its workers.
type BridgeReader interface {
	FleetSnapshot(ctx context.Context, fleet string) (fleetstate.Snapshot, error)
	ListWorkers(ctx context.Context, fleet string) ([]worker.Worker, error)
}

// FleetWaker raises a fleet's recorded desired capacity from zero and
// records why, once across concurrent callers (store.WakeFleet), and
// records the bridges a wake starts (store.RecordBridgeStart).
type FleetWaker interface {
	WakeFleet(ctx context.Context, fleet string, ready, desired int, reason scaling.Reason) (bool, error)
	RecordBridgeStart(ctx context.Context, fleet string, start int, reason scaling.Reason, inputs fleetstate.Inputs) error
}

// Wake raises the fleet to the capacity jobs new jobs need when its recorded
// desired capacity is zero. It never lowers a group that is already larger.
func (w *Waker) Wake(ctx context.Context, fleet string, jobs int) error {
	f, ok := w.cfg.Fleet(fleet)
	if !ok {
		return fmt.Errorf("wake: no fleet %q in the config", fleet)
	}
	covered, live, inPool, err := w.startPool(ctx, f)
	if err != nil {
		return err
	}
	won := false
	if jobs = max(0, jobs-covered); jobs > 0 {
		s := scaling.SettingsOf(f)
		s.Max = max(0, s.Max-live) // the groups share the max with the pool
		want := scaling.Need(s, jobs)
		if won, err = w.store.WakeFleet(ctx, fleet, jobs, want, scaling.WakeReason(jobs)); err != nil {
			return err
		}
		if won {
			if err := raise(ctx, w.capacity, f, want, w.log); err != nil {
				return err
			}
		}
	}
	return w.startBridges(ctx, f, won, covered, inPool)
}

// startPool starts the stopped pool instances the fleet's ready jobs need
// (scaling.PoolStart), within the fleet's max with its groups' instances,
// and answers the ready jobs the pool takes — the decision's, less the
// jobs of starts that failed for want of Spot capacity, which go to the
// bridge —, the pool's live instances and the pool's instance ids.
func (w *Waker) startPool(ctx context.Context, f *fleetconfig.Fleet) (covered, live int, ids map[string]bool, err error) {
	pl, ok := poolOf(f, w.store, w.capacity, w.log)
	if !ok {
		return 0, 0, nil, nil
	}
	backlog, err := w.store.FleetSnapshot(ctx, f.Slug)
	if err != nil || backlog.Ready == 0 {
		return 0, 0, nil, err
	}
	workers, err := w.store.ListWorkers(ctx, f.Slug)
	if err != nil {
		return 0, 0, nil, err
	}
	records, avoided, err := pl.store.ReadPool(ctx, f.Slug)
	if err != nil {
		return 0, 0, nil, err
	}
	spot, err := w.capacity.Describe(ctx, f.Slug)
	if err != nil {
		return 0, 0, nil, err
	}
	in := pl.input(w.clock.Now(), backlog.Ready, workers, records, avoided, 0)
	in.Others = groupCount(spot)
	if l, ok := w.capacity.(Ladder); ok && l.HasOnDemand(f.Slug) {
		od, err := l.DescribeOnDemand(ctx, f.Slug)
		if err != nil {
			return 0, 0, nil, err
		}
		in.Others += groupCount(od)
	}
	rep := &PoolReport{Decision: scaling.PoolStart(in)}
	if err := pl.start(ctx, in, rep.Decision.Starts, rep); err != nil {
		return 0, 0, nil, fmt.Errorf("pool %s: %w", f.Slug, err)
	}
	return rep.Covered, rep.Decision.Live - rep.fallbacks(), poolIDs(records), nil
}

// startBridges starts the bridge instances a fleet's ready jobs need beyond
// the free slots of its running workers and of the bridges already running
// or starting, and beyond the jobs its Spot pool takes (covered; the
// workers of the pool's instances, inPool, are counted there).
func (w *Waker) startBridges(ctx context.Context, f *fleetconfig.Fleet, woken bool, covered int, inPool map[string]bool) error {
	l, ok := w.capacity.(Ladder)
	if !f.Bridge.Enabled() || !ok || !l.HasOnDemand(f.Slug) {
		return nil
	}
	s := scaling.SettingsOf(f)
	backlog, err := w.store.FleetSnapshot(ctx, f.Slug)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", f.Slug, err)
	}
	if backlog.Ready -= covered; backlog.Ready <= 0 {
		return nil
	}
	workers, err := w.store.ListWorkers(ctx, f.Slug)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", f.Slug, err)
	}
	od, err := l.DescribeOnDemand(ctx, f.Slug)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", f.Slug, err)
	}
	slots := max(1, s.Slots)
	registered := map[string]bool{}
	free, idle := 0, 0
	for _, wk := range workers {
		registered[wk.InstanceID] = true
		if wk.Status != worker.Active || inPool[wk.InstanceID] {
			continue
		}
		free += max(0, slots-wk.Leases)
		if wk.Leases == 0 {
			idle++
		}
	}
	for _, inst := range od.Instances {
		if !registered[inst.ID] {
			free += slots // starting
		}
	}
	live := max(od.Desired, len(od.Instances))
	free += (live - len(od.Instances)) * slots
	start := scaling.BridgeStart(s, backlog.Ready, free, live)
	if start == 0 {
		return nil
	}
	if err := l.SetOnDemandDesired(ctx, f.Slug, live+start); err != nil {
		return fmt.Errorf("bridge %s: %w", f.Slug, err)
	}
	spot := scaling.SpotNextTick
	if woken {
		spot = scaling.SpotLaunching
	}
	reason := scaling.BridgeStartReason(start, backlog.Ready, idle, spot)
	w.log.Info("bridge started on enqueue", "fleet", f.Slug, "on_demand_desired", live+start, "reason", reason.String())
	inputs := fleetstate.NewBridgeStartInputs(backlog.Ready, idle, free, live+start)
	if err := w.store.RecordBridgeStart(ctx, f.Slug, start, reason, inputs); err != nil {
		return fmt.Errorf("bridge %s: the group was raised, recording why failed: %w", f.Slug, err)
	}
	return nil
}

func raise(ctx context.Context, c Capacity, f *fleetconfig.Fleet, want int, log *slog.Logger) error {
	g, err := c.Describe(ctx, f.Slug)
	if err != nil {
		return fmt.Errorf("wake %s: %w", f.Slug, err)
	}
	if g.Desired >= want {
		return nil
	}
	if err := c.SetDesired(ctx, f.Slug, want); err != nil {
		return fmt.Errorf("wake %s: %w", f.Slug, err)
	}
	log.Info("fleet woken on enqueue", "fleet", f.Slug, "from", g.Desired, "desired", want)
	return nil
}
