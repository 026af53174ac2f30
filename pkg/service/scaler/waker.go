package scaler

import (
	"context"
	"fmt"
	"log/slog"

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
// (scaling.BridgeStart): Bridge reads its ready jobs and workers for that,
// a snapshot of the live backlog and one query of the workers per batch,
// paid only by fleets with a bridge.
type Waker struct {
	Config   *fleetconfig.Config
	Store    FleetWaker
	Bridge   BridgeReader
	Capacity Capacity
	Logger   *slog.Logger
}

// BridgeReader reads what a bridge's wake needs: the fleet's ready jobs
// and its workers.
type BridgeReader interface {
	FleetSnapshot(ctx context.Context, fleet string) (fleetstate.Snapshot, error)
	ListWorkers(ctx context.Context, fleet string) ([]worker.Worker, error)
}

// FleetWaker raises a fleet's recorded desired capacity from zero and
// records why, once across concurrent callers (store.WakeFleet).
type FleetWaker interface {
	WakeFleet(ctx context.Context, fleet string, ready, desired int) (bool, error)
}

// Wake raises the fleet to the capacity jobs new jobs need when its recorded
// desired capacity is zero. It never lowers a group that is already larger.
func (w *Waker) Wake(ctx context.Context, fleet string, jobs int) error {
	f, ok := w.Config.Fleet(fleet)
	if !ok {
		return fmt.Errorf("wake: no fleet %q in the config", fleet)
	}
	want := scaling.Need(scaling.SettingsOf(f), jobs)
	won, err := w.Store.WakeFleet(ctx, fleet, jobs, want)
	if err != nil {
		return err
	}
	if won {
		if err := raise(ctx, w.Capacity, f, want, w.log()); err != nil {
			return err
		}
	}
	return w.startBridges(ctx, f, won)
}

// startBridges starts the bridge instances a fleet's ready jobs need beyond
// the free slots of its running workers and of the bridges already running
// or starting.
func (w *Waker) startBridges(ctx context.Context, f *fleetconfig.Fleet, woken bool) error {
	l, ok := w.Capacity.(Ladder)
	if !f.Bridge.Enabled() || w.Bridge == nil || !ok || !l.HasOnDemand(f.Slug) {
		return nil
	}
	s := scaling.SettingsOf(f)
	backlog, err := w.Bridge.FleetSnapshot(ctx, f.Slug)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", f.Slug, err)
	}
	if backlog.Ready == 0 {
		return nil
	}
	workers, err := w.Bridge.ListWorkers(ctx, f.Slug)
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
		if wk.Status != worker.Active {
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
	spot := "Spot raised by the next tick"
	if woken {
		spot = "Spot launching"
	}
	w.log().Info("bridge started on enqueue", "fleet", f.Slug, "desired", live+start,
		"reason", fmt.Sprintf("bridge %d: %d ready jobs, %d idle workers, %s", start, backlog.Ready, idle, spot))
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

func (w *Waker) log() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.Default()
}
