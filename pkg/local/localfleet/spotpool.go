package localfleet

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// The stopped Spot pool, locally (docs/scaling.md, "The Spot pool in AWS
// and on the dev stack"): instances of a fleet outside its groups, as EC2
// keeps a persistent Spot request's instance. Created, an instance runs
// without an agent (its preparation) until the scaler stops it; started,
// it is pending for Options.PoolStart of the boot delay and then runs the
// worker under its own instance id; stopped, its worker ends. A start on a
// pair set short (SetPoolShort) fails with scaler.ErrNoSpotCapacity and
// the instance stays stopped. InterruptPoolInstance stops one as EC2 does
// on a Spot interruption: a start of it is refused (scaler.ErrPoolInterrupted)
// until ResumePoolInstance runs it again, as EC2 does when capacity
// returns.

var _ scaler.SpotPool = (*Fleet)(nil)

// spotInstance is one instance of a fleet's Spot pool.
type spotInstance struct {
	id    string
	fleet string
	pair  scaling.Pair
	// state is EC2's: pending, running, stopped.
	state       string
	prepared    bool // stopped once: a start runs the worker
	interrupted bool
	startedAt   time.Time
	machine     Machine
}

// HasSpotPool reports that the local fleet runs every fleet's Spot pool.
func (f *Fleet) HasSpotPool(string) bool { return true }

// CreatePoolInstance launches a pool instance on pair; it runs, without a
// worker, until it is stopped into the pool.
func (f *Fleet) CreatePoolInstance(_ context.Context, fleet string, pair scaling.Pair, _ int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	id := fmt.Sprintf("i-local-%s-spot-%04d", fleet, f.seq)
	f.spotPool()[id] = &spotInstance{id: id, fleet: fleet, pair: pair, state: "running"}
	f.spotCreated++
	return id, nil
}

func (f *Fleet) spotPool() map[string]*spotInstance {
	if f.spot == nil {
		f.spot = map[string]*spotInstance{}
	}
	return f.spot
}

// spotInstanceOf finds a fleet's pool instance. The caller holds f.mu.
func (f *Fleet) spotInstanceOf(fleet, id string) (*spotInstance, error) {
	in, ok := f.spot[id]
	if !ok || in.fleet != fleet {
		return nil, fmt.Errorf("no pool instance %s in fleet %s", id, fleet)
	}
	return in, nil
}

// StartPoolInstance starts a stopped pool instance: its worker runs once
// the start is over (Step). A pair set short refuses with
// scaler.ErrNoSpotCapacity, an interrupted instance with
// scaler.ErrPoolInterrupted.
func (f *Fleet) StartPoolInstance(_ context.Context, fleet, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, err := f.spotInstanceOf(fleet, id)
	if err != nil {
		return err
	}
	switch {
	case in.interrupted:
		f.spotRefused++
		return fmt.Errorf("start %s: %w", id, scaler.ErrPoolInterrupted)
	case in.state != "stopped":
		return nil // already started
	case f.spotShort[in.pair]:
		f.spotFailed++
		return fmt.Errorf("start %s (%s): InsufficientInstanceCapacity: %w", id, in.pair, scaler.ErrNoSpotCapacity)
	}
	in.state, in.startedAt = "pending", f.o.Clock.Now()
	f.spotStarted++
	return nil
}

// StopPoolInstance stops a pool instance back into the pool; its worker
// ends as an instance's stop ends it.
func (f *Fleet) StopPoolInstance(_ context.Context, fleet, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, err := f.spotInstanceOf(fleet, id)
	if err != nil {
		return err
	}
	if in.state == "stopped" {
		return nil
	}
	f.stopSpot(in)
	if in.prepared {
		f.spotStopped++
	}
	in.prepared = true
	return nil
}

// stopSpot stops an instance's worker. The caller holds f.mu.
func (f *Fleet) stopSpot(in *spotInstance) {
	if in.machine != nil {
		if in.machine.Running() > 0 {
			f.stoppedBusy++
		}
		in.machine.Stop()
		in.machine = nil
	}
	in.state = "stopped"
}

// TerminatePoolInstance ends a pool instance.
func (f *Fleet) TerminatePoolInstance(_ context.Context, fleet, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, err := f.spotInstanceOf(fleet, id)
	if err != nil {
		return nil // already gone
	}
	if in.machine != nil {
		if in.machine.Running() > 0 {
			f.killedBusy++
		}
		in.machine.Stop()
	}
	delete(f.spot, id)
	return nil
}

// DescribePool lists a fleet's pool instances, by id.
func (f *Fleet) DescribePool(_ context.Context, fleet string) ([]scaler.PoolMachine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []scaler.PoolMachine
	for _, in := range f.spot {
		if in.fleet == fleet {
			out = append(out, scaler.PoolMachine{ID: in.id, Pair: in.pair, State: in.state, Interrupted: in.interrupted})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// SetPoolShort makes starts on a pair fail for want of Spot capacity (or
// succeed again).
func (f *Fleet) SetPoolShort(pair scaling.Pair, short bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.spotShort == nil {
		f.spotShort = map[scaling.Pair]bool{}
	}
	f.spotShort[pair] = short
}

// InterruptPoolInstance stops a pool instance as EC2 does on a Spot
// interruption (its worker ends): only ResumePoolInstance starts it again.
func (f *Fleet) InterruptPoolInstance(fleet, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, err := f.spotInstanceOf(fleet, id)
	if err != nil {
		return err
	}
	f.stopSpot(in)
	in.interrupted = true
	f.interrupted++
	return nil
}

// ResumePoolInstance is EC2 starting an interrupted pool instance again
// once capacity returns: it runs its worker after the start.
func (f *Fleet) ResumePoolInstance(fleet, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, err := f.spotInstanceOf(fleet, id)
	if err != nil {
		return err
	}
	in.interrupted = false
	in.state, in.startedAt = "pending", f.o.Clock.Now()
	return nil
}

// reconcileSpot runs the worker of each pool instance whose start is over.
// The caller holds f.mu.
func (f *Fleet) reconcileSpot() {
	now := f.o.Clock.Now()
	for _, in := range f.spot {
		if in.state != "pending" || now.Sub(in.startedAt) < f.poolStart() {
			continue
		}
		in.state = "running"
		if f.o.Launch != nil {
			ctx := context.WithValue(f.ctx, purchaseKey{}, cost.Spot)
			ctx = context.WithValue(ctx, launchedKey{}, in.startedAt)
			ctx = context.WithValue(ctx, fromPoolKey{}, true)
			in.machine = f.o.Launch(ctx, in.fleet, in.id)
		}
	}
}
