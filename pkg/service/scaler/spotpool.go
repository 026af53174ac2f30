package scaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// The stopped Spot pool (docs/scaling.md, "The Spot pool in AWS and on the
// dev stack"): the domain decides (scaling.PoolStart on enqueue,
// scaling.DecidePool at the tick); this file applies its orders through
// the pool's records in the store (every move conditional) and the
// machines (EC2 in AWS, the local fleet on the dev stack).

// SpotPool is the machines of the fleets' stopped Spot pools: EC2 in AWS
// (pkg/aws/ec2pool, one adapter per fleet, joined by the composition root),
// the local fleet on the dev stack. A fleet's Capacity that also is a
// SpotPool runs its pool.
type SpotPool interface {
	// HasSpotPool reports whether the fleet's pool can be run here.
	HasSpotPool(fleet string) bool
	// CreatePoolInstance launches a persistent Spot instance on pair for
	// the fleet, to be prepared and stopped into the pool, and answers its
	// id.
	CreatePoolInstance(ctx context.Context, fleet string, pair scaling.Pair, volumeGB int) (string, error)
	// StartPoolInstance starts a stopped pool instance. A start without
	// Spot capacity is ErrNoSpotCapacity (the instance stays stopped); one
	// EC2 refuses because it stopped the instance on an interruption is
	// ErrPoolInterrupted.
	StartPoolInstance(ctx context.Context, fleet, instanceID string) error
	// StopPoolInstance stops a running pool instance back into the pool.
	StopPoolInstance(ctx context.Context, fleet, instanceID string) error
	// TerminatePoolInstance ends a pool instance for good (its Spot
	// request canceled, then the instance terminated).
	TerminatePoolInstance(ctx context.Context, fleet, instanceID string) error
	// DescribePool lists the fleet's pool instances as the machines report
	// them.
	DescribePool(ctx context.Context, fleet string) ([]PoolMachine, error)
}

// PoolMachine is one pool instance as EC2 (or the local fleet) reports it.
type PoolMachine struct {
	ID   string
	Pair scaling.Pair
	// State is EC2's state name: pending, running, stopping, stopped,
	// shutting-down, terminated.
	State string
	// Interrupted: EC2 stopped it on a Spot interruption and holds it
	// stopped; only EC2 starts it again.
	Interrupted bool
}

// SpotNotice is the time from a Spot interruption warning to EC2's stop:
// a pool instance marked interrupted by the warning that still runs after
// it was started again by EC2.
const SpotNotice = 2 * time.Minute

// Errors a SpotPool's start answers, told apart with errors.Is.
var (
	ErrNoSpotCapacity  = errors.New("no Spot capacity")
	ErrPoolInterrupted = errors.New("stopped by EC2 on an interruption; only EC2 starts it again")
)

// PoolStore is what the pool needs of the store: the pool's records, their
// conditional moves, the avoided pairs, and the pool's decisions in the
// fleet's history.
type PoolStore interface {
	ReadPool(ctx context.Context, fleet string) ([]scaling.PoolInstance, scaling.Avoided, error)
	AddPoolInstance(ctx context.Context, fleet string, p scaling.PoolInstance) error
	MovePoolInstance(ctx context.Context, fleet, instanceID string, to scaling.PoolState, at time.Time, startFor int) error
	EndPoolInstance(ctx context.Context, fleet, instanceID string, state scaling.PoolState) error
	AvoidPoolPair(ctx context.Context, fleet string, p scaling.Pair, until time.Time) error
	RecordPoolDecision(ctx context.Context, fleet string, reason scaling.Reason) error
}

// poolWorkers claims an idle worker of a pool instance before it stops
// (the conditional drain), and removes it once stopped.
type poolWorkers interface {
	DrainIdleWorker(ctx context.Context, id string) error
	RemoveIdleWorker(ctx context.Context, w worker.Worker) error
}

// pool applies a fleet's pool orders.
type pool struct {
	store    PoolStore
	machines SpotPool
	// workers is nil for a wake, which stops nothing.
	workers poolWorkers
	log     *slog.Logger
	f       *fleetconfig.Fleet
	s       scaling.Settings
}

// poolOf answers the pool of a fleet whose config has a spot_pool, when
// the capacity runs pools; ok is false otherwise.
func poolOf(f *fleetconfig.Fleet, st PoolStore, capacity Capacity, log *slog.Logger) (pool, bool) {
	s := scaling.SettingsOf(f)
	sp, ok := capacity.(SpotPool)
	if !s.SpotPool.Enabled() || !ok || !sp.HasSpotPool(f.Slug) {
		return pool{}, false
	}
	return pool{store: st, machines: sp, log: log, f: f, s: s}, true
}

// PoolReport is what a tick or a wake did with a fleet's pool.
type PoolReport struct {
	Decision scaling.PoolDecision
	// Started, Stopped, Ended and Created are the instances each order
	// reached; Kept the idle ones whose worker took work before it could
	// be drained (never stopped).
	Started, Stopped, Ended, Created, Kept []string
	// Failed are the starts refused for want of Spot capacity, each with
	// its retry on another pair or the jobs handed to On-Demand.
	Failed []scaling.PoolFailure
	// Covered are the ready jobs the pool takes: the decision's, less the
	// failed starts'.
	Covered int
}

// failedJobs sums the jobs of the failed starts.
func (r *PoolReport) failedJobs() int {
	n := 0
	for _, f := range r.Failed {
		n += f.Jobs
	}
	return n
}

// input is the domain's input for the pool: ready jobs, the free slots
// outside the pool (the active workers of other instances, and On-Demand
// instances starting), the pool and the workers.
func (p pool) input(now time.Time, ready int, workers []worker.Worker, records []scaling.PoolInstance, avoided scaling.Avoided, odStarting int) scaling.PoolInput {
	slots := max(1, p.s.Slots)
	inPool := poolIDs(records)
	in := scaling.PoolInput{Now: now, Settings: p.s, Ready: ready, Pool: records, Avoided: avoided, Free: odStarting * slots}
	for _, w := range workers {
		in.Workers = append(in.Workers, scaling.Worker{ID: w.ID, InstanceID: w.InstanceID, Leases: w.Leases,
			Draining: w.Status != worker.Active, LastSeen: w.LastSeenAt, IdleSince: w.IdleSince()})
		if !inPool[w.InstanceID] && w.Status == worker.Active {
			in.Free += max(0, slots-w.Leases)
		}
	}
	return in
}

func poolIDs(records []scaling.PoolInstance) map[string]bool {
	ids := make(map[string]bool, len(records))
	for _, r := range records {
		ids[r.ID] = true
	}
	return ids
}

// start claims each stopped instance of the starts (a claim another wake
// won is skipped) and starts it. A start without Spot capacity puts the
// instance back to stopped and avoids its pair; its jobs go to a stopped
// instance on another pair (scaling.PoolStartFailed's retry, started the
// same way), and to On-Demand only when none is left (rep.Failed); one EC2
// holds stopped after an interruption is marked interrupted. Each start
// and failure is recorded with its reason. in is the decision's input.
func (p pool) start(ctx context.Context, in scaling.PoolInput, starts []scaling.PoolOrder, rep *PoolReport) error {
	slug, now := p.f.Slug, in.Now
	claimed := make(map[string]bool, len(starts))
	for _, o := range starts {
		claimed[o.ID] = true
	}
	if in.Avoided == nil {
		in.Avoided = scaling.Avoided{}
	}
	starts = slices.Clone(starts)
	for i := 0; i < len(starts); i++ {
		o := starts[i]
		err := p.store.MovePoolInstance(ctx, slug, o.ID, scaling.PoolStarting, now, o.For)
		if errors.Is(err, fault.ErrConflict) {
			continue // another wake claimed it
		}
		if err != nil {
			return err
		}
		err = p.machines.StartPoolInstance(ctx, slug, o.ID)
		switch {
		case err == nil:
			rep.Started = append(rep.Started, o.ID)
			p.log.Info("pool instance started", "fleet", slug, "instance_id", o.ID, "reason", o.Reason.String())
			if err := p.store.RecordPoolDecision(ctx, slug, o.Reason); err != nil {
				return err
			}
		case errors.Is(err, ErrNoSpotCapacity):
			fail := scaling.PoolStartFailed(in, o, claimed)
			in.Avoided.Avoid(fail)
			if fail.Retry != nil {
				claimed[fail.Retry.ID] = true
				starts = append(starts, *fail.Retry)
			}
			rep.Failed = append(rep.Failed, fail)
			p.log.Info("pool start failed", "fleet", slug, "instance_id", o.ID, "reason", fail.Reason.String())
			if err := p.store.MovePoolInstance(ctx, slug, o.ID, scaling.PoolStopped, now, 0); err != nil {
				return err
			}
			if err := p.store.AvoidPoolPair(ctx, slug, fail.Pair, fail.Until); err != nil {
				return err
			}
			if err := p.store.RecordPoolDecision(ctx, slug, fail.Reason); err != nil {
				return err
			}
		case errors.Is(err, ErrPoolInterrupted):
			if err := p.markInterrupted(ctx, now, o.ID); err != nil {
				return err
			}
		default:
			// Back to stopped: the next wake or tick may try again.
			p.log.Warn("pool start", "fleet", slug, "instance_id", o.ID, "error", err.Error())
			if err := p.store.MovePoolInstance(ctx, slug, o.ID, scaling.PoolStopped, now, 0); err != nil {
				return err
			}
		}
	}
	rep.Covered = max(0, rep.Decision.Covered-rep.failedJobs())
	return nil
}

// fallbacks counts the failed starts whose jobs went to On-Demand (no
// retry took them): the pool's live instances are the decision's less
// them.
func (r *PoolReport) fallbacks() int {
	n := 0
	for _, f := range r.Failed {
		if f.Retry == nil {
			n++
		}
	}
	return n
}

// markInterrupted records that EC2 stopped a pool instance on an
// interruption: no start claims it until EC2 runs it again.
func (p pool) markInterrupted(ctx context.Context, now time.Time, id string) error {
	if err := p.store.MovePoolInstance(ctx, p.f.Slug, id, scaling.PoolInterrupted, now, 0); err != nil && !errors.Is(err, fault.ErrConflict) {
		return err
	}
	return p.store.RecordPoolDecision(ctx, p.f.Slug, scaling.PoolInterruptedReason(id))
}

// tickPool runs a fleet's pool at the tick, before its groups are decided:
// it brings the pool's records in line with the machines (sync), decides
// with scaling.DecidePool, and applies the orders — idle instances stopped
// back into the pool (each worker claimed first with the store's
// conditional drain, so one holding a lease is never stopped), ends,
// refills, starts. The groups are then decided for the ready jobs the pool
// does not take (a failed start's jobs among them: the bridge or the
// ladder's On-Demand launch covers them), and the jobs leased on pool
// instances keep the fleet active.
func (s *Scaler) tickPool(ctx context.Context, f *fleetconfig.Fleet, snap snapshot, p *decisionPlan, r *FleetReport) error {
	pl, ok := poolOf(f, s.store, s.c.Capacity, s.log)
	if !ok {
		return nil
	}
	pl.workers = s.store
	records, avoided, err := pl.store.ReadPool(ctx, f.Slug)
	if err != nil {
		return err
	}
	machines, err := pl.machines.DescribePool(ctx, f.Slug)
	if err != nil {
		return err
	}
	if records, err = pl.sync(ctx, snap.now, records, machines, snap.workers); err != nil {
		return err
	}
	odStarting, others := 0, groupCount(snap.group)
	if snap.ladder != nil {
		odStarting = unregistered(snap.ladder.onDemand.Instances, snap.workers)
		others += groupCount(snap.ladder.onDemand)
	}
	in := pl.input(snap.now, p.input.Ready, snap.workers, records, avoided, odStarting)
	in.Others = others
	rep := &PoolReport{Decision: scaling.DecidePool(in)}
	r.Pool = rep
	d := rep.Decision
	d.Ends = append(d.Ends, drainedPool(records, snap.workers)...)
	rep.Decision.Ends = d.Ends
	if err := pl.stop(ctx, snap.now, d.Stops, p, rep); err != nil {
		return err
	}
	states := make(map[string]scaling.PoolState, len(records))
	for _, rec := range records {
		states[rec.ID] = rec.State
	}
	for _, o := range d.Ends {
		if err := pl.machines.TerminatePoolInstance(ctx, f.Slug, o.ID); err != nil {
			s.log.Warn("end pool instance", "fleet", f.Slug, "instance_id", o.ID, "error", err.Error())
			continue
		}
		if err := pl.store.EndPoolInstance(ctx, f.Slug, o.ID, states[o.ID]); err != nil && !errors.Is(err, fault.ErrConflict) {
			return err
		}
		rep.Ended = append(rep.Ended, o.ID)
		if err := pl.store.RecordPoolDecision(ctx, f.Slug, o.Reason); err != nil {
			return err
		}
	}
	if err := pl.create(ctx, snap.now, d.Creates, rep); err != nil {
		return err
	}
	if err := pl.start(ctx, in, d.Starts, rep); err != nil {
		return err
	}
	p.input.Ready = max(0, p.input.Ready-rep.Covered)
	p.input.Leased = max(0, p.input.Leased-d.Leased)
	p.input.Elsewhere += d.Leased
	// The groups share the fleet's max with the pool's live instances.
	p.input.Settings.Max = max(0, p.input.Settings.Max-(d.Live-rep.fallbacks()))
	return nil
}

// groupCount is a group's instances, booting or running, and the launches
// asked for beyond them.
func groupCount(g Group) int { return max(g.Desired, len(g.Instances)) }

// drainedPool answers an end for each started pool instance whose workers
// are all drained (or revoked) and hold no lease: what a failed GPU health
// check or an operator leaves behind, ended as a drained group instance is
// terminated.
func drainedPool(records []scaling.PoolInstance, workers []worker.Worker) []scaling.PoolOrder {
	type tally struct{ workers, drained int }
	on := map[string]*tally{}
	for _, w := range workers {
		t := on[w.InstanceID]
		if t == nil {
			t = &tally{}
			on[w.InstanceID] = t
		}
		t.workers++
		if w.Status != worker.Active && w.Leases <= 0 {
			t.drained++
		}
	}
	var out []scaling.PoolOrder
	for _, rec := range records {
		if t := on[rec.ID]; (rec.State == scaling.PoolRunning || rec.State == scaling.PoolStarting) && t != nil && t.drained == t.workers {
			out = append(out, scaling.PoolOrder{ID: rec.ID, Pair: rec.Pair, Reason: scaling.PoolDrainedReason(rec.ID)})
		}
	}
	return out
}

// unregistered counts the instances no worker registered from yet.
func unregistered(instances []scaling.Instance, workers []worker.Worker) int {
	seen := map[string]bool{}
	for _, w := range workers {
		seen[w.InstanceID] = true
	}
	n := 0
	for _, in := range instances {
		if !seen[in.ID] {
			n++
		}
	}
	return n
}

// sync brings the pool's records in line with the machines, each change a
// conditional move: a prepared instance that EC2 runs is stopped into the
// pool (and is stopped once EC2 says so; so is a stopping one whose stop
// failed), a started one whose worker
// registered is running, a stopped one is stopped, one EC2 stopped on an
// interruption is interrupted (and running again once EC2 runs it), one
// EC2 no longer has is forgotten. It answers the records as they now are.
func (p pool) sync(ctx context.Context, now time.Time, records []scaling.PoolInstance, machines []PoolMachine, workers []worker.Worker) ([]scaling.PoolInstance, error) {
	byID := make(map[string]PoolMachine, len(machines))
	for _, m := range machines {
		byID[m.ID] = m
	}
	registered := map[string]bool{}
	for _, w := range workers {
		registered[w.InstanceID] = true
	}
	slug := p.f.Slug
	out := records[:0:0]
	for _, rec := range records {
		m, ok := byID[rec.ID]
		to := rec.State
		switch {
		case !ok || m.State == "terminated" || m.State == "shutting-down":
			// Gone from EC2: its record goes too (unless it moved meanwhile).
			err := p.store.EndPoolInstance(ctx, slug, rec.ID, rec.State)
			if err == nil {
				continue
			}
			if !errors.Is(err, fault.ErrConflict) {
				return nil, err
			}
		case m.Interrupted && rec.State != scaling.PoolInterrupted:
			to = scaling.PoolInterrupted
		case rec.State == scaling.PoolInterrupted && (m.State == "running" || m.State == "pending") && now.Sub(rec.Since) >= SpotNotice:
			// Running past the warning's notice: EC2 started it again.
			to = scaling.PoolRunning
		case (rec.State == scaling.PoolPreparing || rec.State == scaling.PoolStopping) && m.State == "running":
			// Prepared: stopped into the pool. Stopping (its workers
			// drained, a stop that failed): stopped again.
			if err := p.machines.StopPoolInstance(ctx, slug, rec.ID); err != nil {
				p.log.Warn("stop pool instance", "fleet", slug, "instance_id", rec.ID, "state", string(rec.State), "error", err.Error())
			}
		case (rec.State == scaling.PoolPreparing || rec.State == scaling.PoolStopping) && m.State == "stopped":
			to = scaling.PoolStopped
		case rec.State == scaling.PoolStarting && registered[rec.ID]:
			to = scaling.PoolRunning
		}
		if to != rec.State {
			startFor := rec.StartFor
			if err := p.store.MovePoolInstance(ctx, slug, rec.ID, to, now, startFor); err != nil {
				if !errors.Is(err, fault.ErrConflict) {
					return nil, err
				}
				continue // moved meanwhile: the next tick sees it
			}
			switch {
			case to == scaling.PoolInterrupted:
				if err := p.store.RecordPoolDecision(ctx, slug, scaling.PoolInterruptedReason(rec.ID)); err != nil {
					return nil, err
				}
			case rec.State == scaling.PoolInterrupted:
				if err := p.store.RecordPoolDecision(ctx, slug, scaling.PoolBackReason(rec.ID)); err != nil {
					return nil, err
				}
			}
			rec.State, rec.Since = to, now
		}
		out = append(out, rec)
	}
	return out, nil
}

// stop stops each idle instance of the stops back into the pool: every
// worker on it is claimed with the store's conditional drain first (it
// holds only while the worker has no lease), the record moves running →
// stopping, the machine is stopped, and its drained workers are removed.
// An instance whose worker took work meanwhile is kept running.
func (p pool) stop(ctx context.Context, now time.Time, stops []scaling.PoolOrder, plan *decisionPlan, rep *PoolReport) error {
	slug := p.f.Slug
	for _, o := range stops {
		var drained []worker.Worker
		kept := false
		for _, w := range plan.workers {
			if w.InstanceID != o.ID || w.Status == worker.Revoked {
				continue
			}
			if err := p.workers.DrainIdleWorker(ctx, w.ID); err != nil {
				if !errors.Is(err, fault.ErrConflict) {
					return err
				}
				kept = true
				break
			}
			drained = append(drained, w)
		}
		if kept {
			rep.Kept = append(rep.Kept, o.ID)
			continue
		}
		if err := p.store.MovePoolInstance(ctx, slug, o.ID, scaling.PoolStopping, now, 0); err != nil {
			if !errors.Is(err, fault.ErrConflict) {
				return err
			}
			rep.Kept = append(rep.Kept, o.ID)
			continue
		}
		if err := p.machines.StopPoolInstance(ctx, slug, o.ID); err != nil {
			// The record says stopping; the next tick's sync sees the
			// machine still running and the worker drained.
			p.log.Warn("stop pool instance", "fleet", slug, "instance_id", o.ID, "error", err.Error())
			continue
		}
		rep.Stopped = append(rep.Stopped, o.ID)
		for _, w := range drained {
			if err := p.workers.RemoveIdleWorker(ctx, w); err != nil {
				p.log.Warn("remove stopped pool worker", "worker_id", w.ID, "error", err.Error())
			}
		}
		if err := p.store.RecordPoolDecision(ctx, slug, o.Reason); err != nil {
			return err
		}
	}
	return nil
}

// create launches the refill's instances and records each as preparing;
// the refill is recorded once, with how many were launched.
func (p pool) create(ctx context.Context, now time.Time, creates []scaling.PoolOrder, rep *PoolReport) error {
	slug := p.f.Slug
	for _, o := range creates {
		id, err := p.machines.CreatePoolInstance(ctx, slug, o.Pair, p.s.SpotPool.VolumeGB)
		if err != nil {
			p.log.Warn("create pool instance", "fleet", slug, "pair", o.Pair.String(), "error", err.Error())
			continue
		}
		if err := p.store.AddPoolInstance(ctx, slug, scaling.PoolInstance{ID: id, Pair: o.Pair, State: scaling.PoolPreparing, Since: now, Created: now}); err != nil {
			return err
		}
		rep.Created = append(rep.Created, id)
	}
	if len(rep.Created) > 0 {
		reason := creates[0].Reason
		if len(rep.Created) > 1 {
			reason = reason.With(fmt.Sprintf("%d instances launched in all", len(rep.Created)))
		}
		return p.store.RecordPoolDecision(ctx, slug, reason)
	}
	return nil
}
