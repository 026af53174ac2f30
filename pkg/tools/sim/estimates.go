package sim

import (
	"slices"
	"strconv"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/eta"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// With Options.Estimates, a run under fleetq's policy measures its start
// estimates (pkg/domain/eta): at each job's submit (once the job is queued
// and the wake on enqueue is done, before any poll leases it) and after
// each tick for every queued job, it builds the eta.Snapshot a real fleet
// would have from its state, calls eta.Project, and checks each estimate
// against the job's next lease. The projection knows what the store would
// know: the queue, the running jobs and when they were leased, the
// instances and when they were first seen, the last runs of each workflow
// and the last boots; never a job's own duration nor an instance's boot
// delay before it is seen.

// keepRuns and keepBoots are how many recent run times (per workflow) and
// boots the simulated fleet remembers, as the fleet's state would.
const (
	keepRuns  = 200
	keepBoots = 20
)

// Accuracy counts estimates and those within the goal: an estimated start
// within max(60 s, 20% of the wait from the estimate to the lease) of the
// actual lease.
type Accuracy struct {
	Estimates int `json:"estimates"`
	Within    int `json:"within"`
	// Unknown are estimates with no start (a zero StartAt); they count as
	// misses.
	Unknown int `json:"unknown"`
	// Waited and WaitedWithin are those of them made more than a minute
	// before the lease.
	Waited       int `json:"waited"`
	WaitedWithin int `json:"waited_within"`
	// P90ErrorS is the 90th percentile of the known estimates' error
	// (|estimate - lease|), seconds.
	P90ErrorS float64 `json:"p90_error_s"`
	errs      []time.Duration
}

// Share is the share of estimates within the goal (0 with none).
func (a Accuracy) Share() float64 { return share(a.Within, a.Estimates) }

// WaitedShare is the share within the goal of those made more than a
// minute before the lease.
func (a Accuracy) WaitedShare() float64 { return share(a.WaitedWithin, a.Waited) }

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func (a *Accuracy) add(est, made, leased time.Duration, known bool) {
	wait := leased - made
	ok := false
	a.Estimates++
	if known {
		err := est - leased
		if err < 0 {
			err = -err
		}
		a.errs = append(a.errs, err)
		ok = err <= max(time.Minute, wait/5)
	} else {
		a.Unknown++
	}
	if ok {
		a.Within++
	}
	if wait > time.Minute {
		a.Waited++
		if ok {
			a.WaitedWithin++
		}
	}
}

func (a *Accuracy) finish() {
	a.P90ErrorS = quantile(a.errs, 0.9).Seconds()
}

// Estimates are a run's estimates against the actual leases.
type Estimates struct {
	// AtSubmit are the estimates made as each job was queued; AtTicks those
	// made after each tick for every job still queued.
	AtSubmit Accuracy `json:"at_submit"`
	AtTicks  Accuracy `json:"at_ticks"`
	// ByCode are all of them by what the job waited on when made.
	ByCode map[eta.Code]*Accuracy `json:"by_code"`
	// Unresolved are estimates of jobs not leased again by the horizon.
	Unresolved int `json:"unresolved"`
}

// pendingEstimate is an estimate waiting for its job's next lease.
type pendingEstimate struct {
	made, at time.Duration
	known    bool
	submit   bool
	code     eta.Code
}

// estimator is the engine's part that makes and keeps estimates.
type estimator struct {
	policy  *Fleetq
	pending map[int][]pendingEstimate
	runs    map[string]eta.History
	boots   eta.History
	res     *Estimates
}

func (e *engine) newEstimator() *estimator {
	p, ok := e.pol.(*Fleetq)
	if !e.opt.Estimates || !ok {
		return nil
	}
	return &estimator{policy: p, pending: map[int][]pendingEstimate{}, runs: map[string]eta.History{},
		res: &Estimates{ByCode: map[eta.Code]*Accuracy{}}}
}

// estimate projects the queue now and keeps the estimates of the jobs
// given (nil: every queued job).
func (e *engine) estimate(only *jobState) {
	x := e.est
	if x == nil || len(e.waiting) == 0 {
		return
	}
	byID := map[string]*jobState{}
	for _, j := range e.waiting {
		byID[strconv.Itoa(j.id)] = j
	}
	for _, est := range eta.Project(e.etaSnapshot(), epoch.Add(e.now)) {
		j := byID[est.JobID]
		if j == nil || (only != nil && j != only) {
			continue
		}
		pe := pendingEstimate{made: e.now, known: est.Known(), submit: only != nil, code: est.WaitingOn.Code}
		if pe.known {
			pe.at = est.StartAt.Sub(epoch)
		}
		x.pending[j.id] = append(x.pending[j.id], pe)
	}
}

// leased resolves the job's estimates against its lease now.
func (e *engine) leased(j *jobState) {
	x := e.est
	if x == nil {
		return
	}
	for _, pe := range x.pending[j.id] {
		a := &x.res.AtTicks
		if pe.submit {
			a = &x.res.AtSubmit
		}
		a.add(pe.at, pe.made, e.now, pe.known)
		c := x.res.ByCode[pe.code]
		if c == nil {
			c = &Accuracy{}
			x.res.ByCode[pe.code] = c
		}
		c.add(pe.at, pe.made, e.now, pe.known)
	}
	delete(x.pending, j.id)
}

// ran remembers a completed run of the workflow.
func (e *engine) ran(j *jobState, took time.Duration) {
	if x := e.est; x != nil {
		x.runs[j.spec.Workflow] = keep(x.runs[j.spec.Workflow], took, keepRuns)
	}
}

// booted remembers an instance's boot.
func (e *engine) booted(in *instance) {
	if x := e.est; x != nil {
		x.boots = keep(x.boots, in.readyAt-in.launched, keepBoots)
	}
}

func keep(h eta.History, d time.Duration, n int) eta.History {
	h = append(h, d)
	if len(h) > n {
		h = slices.Delete(h, 0, len(h)-n)
	}
	return h
}

// estimates finishes the run's estimates.
func (e *engine) estimates() *Estimates {
	x := e.est
	if x == nil {
		return nil
	}
	for _, ps := range x.pending {
		x.res.Unresolved += len(ps)
	}
	x.res.AtSubmit.finish()
	x.res.AtTicks.finish()
	for _, a := range x.res.ByCode {
		a.finish()
	}
	return x.res
}

// etaSnapshot is the fleet as the store would show it now.
func (e *engine) etaSnapshot() eta.Snapshot {
	x := e.est
	p := x.policy
	o := e.observe()
	now := epoch.Add(e.now)
	iv := p.Interval()
	s := eta.Snapshot{
		Settings:     p.settingsFor(o),
		Desired:      e.desired,
		LastActiveAt: p.lastActive,
		NextTick:     epoch.Add(e.lastTick + iv), // now when a tick is due at this very moment
		Interval:     iv,
		Boot:         x.boots,
		RunTimes:     x.runs,
	}
	if e.opt.FairShare {
		s.Tenants = func(id string) fleetconfig.Tenant {
			return fleetconfig.Tenant{ID: id, MaxLeased: e.opt.TenantMaxLeased}
		}
	}
	for _, j := range e.waiting {
		s.Queued = append(s.Queued, eta.Queued{Candidate: lease.Candidate{JobID: strconv.Itoa(j.id), TenantID: j.spec.Tenant,
			WorkflowID: j.spec.Workflow, Created: epoch.Add(j.spec.Arrival), OnDemandOnly: j.pinned}})
	}
	if p.after > 0 || e.spotShortSince >= 0 {
		// The Spot group and the On-Demand one beside it, or a group of one
		// whose Spot launches are failing (its scaling activities say so).
		s.Spot = &eta.Spot{After: p.after, WaitSLO: p.waitSLO, OnDemand: map[string]bool{}, SpotDesired: e.desired, OnDemandDesired: e.odDesired}
		if e.spotShortSince >= 0 {
			s.Spot.ShortSince = epoch.Add(e.spotShortSince)
		}
		s.Desired += e.odDesired
	}
	for _, id := range e.order {
		in := e.insts[id]
		sid := strconv.Itoa(id)
		state := scaling.StatePending
		if in.registered {
			state = scaling.StateInService
		}
		s.Instances = append(s.Instances, scaling.Instance{ID: sid, LifecycleState: state, FirstSeen: epoch.Add(in.launched)})
		if s.Spot != nil && in.onDemand {
			s.Spot.OnDemand[sid] = true
		}
		if !in.registered {
			continue
		}
		w := eta.Worker{Worker: scaling.Worker{ID: "w" + sid, InstanceID: sid, Leases: len(in.jobs), Draining: in.warned || in.draining,
			LastSeen: now, IdleSince: epoch.Add(in.idleSince)}, OnDemand: in.onDemand}
		s.Workers = append(s.Workers, w)
		for _, j := range in.jobs {
			s.Running = append(s.Running, eta.Running{JobID: strconv.Itoa(j.id), TenantID: j.spec.Tenant, WorkflowID: j.spec.Workflow,
				WorkerID: w.ID, LeasedAt: epoch.Add(j.started), OnDemandOnly: j.pinned})
		}
	}
	return s
}
