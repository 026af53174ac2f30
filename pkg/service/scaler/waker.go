package scaler

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Waker scales a fleet from zero in the dispatch invocation that created its
// first work, without waiting for the next tick. Concurrent invocations are
// deduplicated by a conditional write on the fleet's state
// (store.WakeFleet), which also records the wake as the fleet's scaling
// decision: only the winner touches the group.
type Waker struct {
	Config   *fleetconfig.Config
	Store    FleetWaker
	Capacity Capacity
	Logger   *slog.Logger
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
	if err != nil || !won {
		return err
	}
	return raise(ctx, w.Capacity, f, want, w.log())
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
