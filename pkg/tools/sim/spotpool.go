package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// The Spot pool's defaults in the simulator (fleetq simulate --spot-pool).
var (
	// DefaultPoolPairs are the pairs a simulated pool spreads over: two
	// zones of g5.xlarge and one of g6.xlarge (zones named as SpotZones,
	// so --spot-hotspot reaches pool instances too).
	DefaultPoolPairs = []scaling.Pair{{InstanceType: "g5.xlarge", Zone: "a"}, {InstanceType: "g5.xlarge", Zone: "b"}, {InstanceType: "g6.xlarge", Zone: "a"}}
	// DefaultPoolRestart is how long EC2 keeps a pool instance it stopped
	// on a Spot interruption before it starts it again (an assumption: it
	// does so when capacity returns, which no one publishes).
	DefaultPoolRestart = 30 * time.Minute
)

// Defaults of a pool instance: its root volume, its age before
// replacement, and how long a pair whose start failed is avoided
// (fleetconfig's spot_pool defaults, docs/config.md).
const (
	DefaultPoolVolumeGB = fleetconfig.DefaultSpotPoolVolumeGB
	DefaultPoolMaxAge   = fleetconfig.DefaultSpotPoolMaxAgeHours * time.Hour
	DefaultPoolAvoid    = fleetconfig.DefaultSpotPoolAvoidMinutes * time.Minute
)

// spotPooler is a policy with a stopped Spot pool.
type spotPooler interface {
	spotPool() scaling.SpotPoolSettings
}

// PoolFailure is a rate of failed Spot starts (InsufficientInstanceCapacity)
// on one pair of a Spot pool (fleetq simulate --pool-start-failure).
type PoolFailure struct {
	Pair scaling.Pair
	// Rate is the share of starts on the pair that fail, 0 to 1.
	Rate float64
}

// ParsePair reads TYPE@ZONE ("g5.xlarge@a").
func ParsePair(v string) (scaling.Pair, error) {
	typ, zone, ok := strings.Cut(v, "@")
	if !ok || typ == "" || zone == "" {
		return scaling.Pair{}, fmt.Errorf("pair %q: want TYPE@ZONE (e.g. g5.xlarge@a)", v)
	}
	return scaling.Pair{InstanceType: typ, Zone: zone}, nil
}

// ParsePoolFailure reads TYPE@ZONE=RATE ("g5.xlarge@a=0.3").
func ParsePoolFailure(v string) (PoolFailure, error) {
	bad := fmt.Errorf("pool start failure %q: want TYPE@ZONE=RATE, the share of Spot starts on the pair that fail, 0 to 1 (e.g. g5.xlarge@a=0.3)", v)
	where, rate, ok := strings.Cut(v, "=")
	if !ok {
		return PoolFailure{}, bad
	}
	p, err := ParsePair(where)
	r, err2 := strconv.ParseFloat(rate, 64)
	if err != nil || err2 != nil || r < 0 || r > 1 || math.IsNaN(r) {
		return PoolFailure{}, bad
	}
	return PoolFailure{Pair: p, Rate: r}, nil
}

// poolSettings are the Spot pool fleetq's policy runs with: the fleet
// config's spot_pool, or Options.SpotPool and its pairs, with the
// defaults filled.
func (o *Options) poolSettings(s scaling.SpotPoolSettings) scaling.SpotPoolSettings {
	switch {
	case o.SpotPool < 0:
		return scaling.SpotPoolSettings{}
	case o.SpotPool > 0:
		s.Size = o.SpotPool
	}
	if s.Size <= 0 {
		return scaling.SpotPoolSettings{}
	}
	if len(o.SpotPoolPairs) > 0 {
		s.Pairs = o.SpotPoolPairs
	}
	if len(s.Pairs) == 0 {
		s.Pairs = DefaultPoolPairs
	}
	if s.VolumeGB <= 0 {
		s.VolumeGB = DefaultPoolVolumeGB
	}
	if s.MaxAge <= 0 {
		s.MaxAge = DefaultPoolMaxAge
	}
	if s.Avoid <= 0 {
		s.Avoid = DefaultPoolAvoid
	}
	if o.PoolIdle > 0 {
		s.Idle = o.PoolIdle
	}
	return s
}

func (o *Options) poolDefaults() {
	if o.PoolStartMin <= 0 {
		o.PoolStartMin, o.PoolStartMax = DefaultStoppedStart[0], DefaultStoppedStart[1]
	}
	if o.PoolStartMax < o.PoolStartMin {
		o.PoolStartMax = o.PoolStartMin
	}
	if o.PoolRestart <= 0 {
		o.PoolRestart = DefaultPoolRestart
	}
}

// poolMember is one instance of the Spot pool, as EC2 has it.
type poolMember struct {
	id             string
	pair           scaling.Pair
	state          scaling.PoolState
	since, created time.Duration
	// inst is the instance while it is starting or running.
	inst *instance
	// gen counts its state changes, so a stale event is ignored.
	gen int
}

// fillPool puts the pool in place at deploy: every instance stopped,
// spread over the pairs in turn.
func (e *engine) fillPool() {
	for i := range e.poolCfg.Size {
		e.members = append(e.members, &poolMember{id: fmt.Sprintf("p-%d", i+1), pair: e.poolCfg.Pairs[i%len(e.poolCfg.Pairs)],
			state: scaling.PoolStopped})
	}
}

func (e *engine) member(id string) *poolMember {
	for _, m := range e.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// to moves a member to a state now.
func (m *poolMember) to(st scaling.PoolState, now time.Duration) {
	m.state, m.since = st, now
	m.gen++
}

// poolStart starts a stopped member; it reports false when the start
// fails for want of Spot capacity (the member stays stopped).
func (e *engine) poolStart(m *poolMember) bool {
	if rate := e.opt.poolFailureRate(m.pair); rate > 0 && e.rng.Float64() < rate {
		e.res.PoolStartFailures++
		return false
	}
	e.res.PoolStarts++
	m.to(scaling.PoolStarting, e.now)
	e.runMember(m)
	return true
}

// runMember starts a member's instance: billed at the Spot price from now,
// registered after a stopped instance's start delay, interrupted as any
// Spot instance of its pair.
func (e *engine) runMember(m *poolMember) {
	e.nextInst++
	in := &instance{id: e.nextInst, launched: e.now, readyAt: e.now + e.between(e.opt.PoolStartMin, e.opt.PoolStartMax),
		member: m, typ: m.pair.InstanceType, zone: m.pair.Zone}
	m.inst = in
	e.insts[in.id] = in
	e.order = append(e.order, in.id)
	e.push(&event{at: in.readyAt, kind: evReady, inst: in.id})
	if life, ok := e.spotLife(in.typ, in.zone); ok {
		if at := e.now + life; at <= e.opt.Horizon {
			e.push(&event{at: at, kind: evWarn, inst: in.id})
		}
	}
}

func (o *Options) poolFailureRate(p scaling.Pair) float64 {
	for _, f := range o.PoolStartFailures {
		if f.Pair == p {
			return f.Rate
		}
	}
	return 0
}

// poolStop stops a member's instance back into the pool (stopped a minute
// later); a job still on it is killed (the policy never asks for that:
// Result.Killed says if it did).
func (e *engine) poolStop(m *poolMember) {
	if m.inst != nil && !m.inst.gone {
		e.remove(m.inst, true)
	}
	m.inst = nil
	m.to(scaling.PoolStopping, e.now)
	e.res.PoolStops++
	e.push(&event{at: e.now + time.Minute, kind: evPoolStopped, member: m, run: m.gen})
}

// poolEnd ends a member: its Spot request cancelled, terminated.
func (e *engine) poolEnd(m *poolMember) {
	if m.inst != nil && !m.inst.gone {
		e.remove(m.inst, true)
	}
	m.inst = nil
	m.to(scaling.PoolGone, e.now)
}

// poolCreate launches a member on pair, prepares it (a fresh boot, billed
// at the Spot price) and stops it into the pool.
func (e *engine) poolCreate(pair scaling.Pair) {
	m := &poolMember{id: fmt.Sprintf("p-%d", len(e.members)+1), pair: pair, created: e.now}
	m.to(scaling.PoolPreparing, e.now)
	e.members = append(e.members, m)
	boot := e.between(e.opt.BootMin, e.opt.BootMax)
	e.nextInst++
	e.insts[e.nextInst] = &instance{id: e.nextInst, launched: e.now, gone: true, ended: e.now + boot, member: m, typ: pair.InstanceType, zone: pair.Zone}
	e.res.PoolCreates++
	e.push(&event{at: e.now + boot + time.Minute, kind: evPoolStopped, member: m, run: m.gen})
}

// poolInterrupted is EC2 stopping a member on a Spot interruption: only EC2
// starts it again, after Options.PoolRestart.
func (e *engine) poolInterrupted(m *poolMember) {
	m.inst = nil
	m.to(scaling.PoolInterrupted, e.now)
	e.res.PoolInterruptions++
	e.push(&event{at: e.now + e.opt.PoolRestart, kind: evPoolBack, member: m, run: m.gen})
}

// poolEvent handles a member's own events: stopped (after a stop or its
// preparation) and EC2's restart of an interrupted one.
func (e *engine) poolEvent(ev *event) {
	m := ev.member
	if m.gen != ev.run {
		return
	}
	switch ev.kind {
	case evPoolStopped:
		m.to(scaling.PoolStopped, e.now)
	case evPoolBack:
		// EC2 starts it unrequested: it runs (and bills) until fleetq
		// stops it again.
		m.to(scaling.PoolRunning, e.now)
		e.runMember(m)
	}
}

// applyPool applies a policy's pool orders. A start that fails is put to
// the policy (Trigger PoolFailed) for its fallback: another start, or
// On-Demand.
func (e *engine) applyPool(a Action) {
	for _, o := range a.PoolStops {
		if m := e.member(o); m != nil && (m.state == scaling.PoolRunning || m.state == scaling.PoolStarting) {
			if m.inst != nil && len(m.inst.jobs) > 0 {
				e.res.PoolBusyStops++
			}
			e.poolStop(m)
		}
	}
	for _, o := range a.PoolEnds {
		if m := e.member(o); m != nil && m.state != scaling.PoolGone {
			e.poolEnd(m)
		}
	}
	for _, p := range a.PoolCreates {
		e.poolCreate(p)
	}
	var failed []scaling.PoolOrder
	for _, o := range a.PoolStarts {
		m := e.member(o.ID)
		if m == nil || m.state != scaling.PoolStopped {
			e.res.PoolBadStarts++ // an interrupted or busy one: never asked for
			continue
		}
		if !e.poolStart(m) {
			failed = append(failed, o)
		}
	}
	for _, o := range failed {
		e.failed = &o
		if a := e.decide(PoolFailed); len(a.PoolStarts) == 0 {
			e.res.PoolFallbackJobs += o.For // no other Spot start took them
		}
		e.failed = nil
	}
}

// poolViews is the pool as the control plane's records show it.
func (e *engine) poolViews() []scaling.PoolInstance {
	out := make([]scaling.PoolInstance, 0, len(e.members))
	for _, m := range e.members {
		out = append(out, scaling.PoolInstance{ID: m.id, Pair: m.pair, State: m.state, Since: epoch.Add(m.since), Created: epoch.Add(m.created)})
	}
	return out
}

// poolStorage is the pool's volumes for the workload's days.
func (e *engine) poolStorage() float64 {
	days := e.res.WorkloadEnd
	if days <= 0 {
		days = e.now
	}
	return cost.Volumes(e.poolCfg.Size, e.poolCfg.VolumeGB, e.opt.EBSPricePerGBMonth, days)
}

// billed is an instance's billed time: from its launch or start to its
// end, at least a minute for a pool instance's start (EC2 bills a start
// for a minute at least).
func (in *instance) billed(end time.Duration) time.Duration {
	d := end - in.launched
	if in.member != nil {
		d = max(d, time.Minute)
	}
	return d
}

// WithSpotPool gives the fleet a stopped Spot pool (zero size leaves the
// fleet config's; a negative one turns it off).
func (p *Fleetq) WithSpotPool(o Options) *Fleetq {
	p.settings.SpotPool = o.poolSettings(p.settings.SpotPool)
	if p.avoided == nil {
		p.avoided = scaling.Avoided{}
	}
	return p
}

// spotPool implements spotPooler.
func (p *Fleetq) spotPool() scaling.SpotPoolSettings { return p.settings.SpotPool }

// poolInput is the pool's decision input from an observation: the free
// slots outside the pool are those of the groups' registered workers and
// of On-Demand instances starting (bridges, fallbacks), not of Spot
// launches still booting; the groups' instances are their desired
// capacities.
func (p *Fleetq) poolInput(o Observation, s scaling.Settings, ready int) scaling.PoolInput {
	now := epoch.Add(o.Now)
	in := scaling.PoolInput{Now: now, Settings: s, Ready: ready, Pool: o.Pool, Avoided: p.avoided,
		Others: o.Desired + o.OnDemandDesired}
	od := 0
	for _, v := range o.Instances {
		switch {
		case v.PoolID != "":
			if v.Registered {
				in.Workers = append(in.Workers, scaling.Worker{ID: "w" + v.PoolID, InstanceID: v.PoolID, Leases: v.Busy,
					Draining: v.Draining, LastSeen: now, IdleSince: epoch.Add(v.IdleSince)})
			}
			continue
		case v.OnDemand:
			od++
		}
		switch {
		case v.Draining:
		case v.Registered:
			in.Free += max(0, o.Slots-v.Busy)
		case v.OnDemand:
			in.Free += o.Slots
		}
	}
	in.Free += max(0, o.OnDemandDesired-od) * o.Slots
	return in
}

// poolFailed is the fallback of a failed pool start, as the scaler applies
// it (scaling.PoolStartFailed): the pair avoided, and the start's jobs
// started on another pair's stopped instance when one is left (a start
// that may fail in turn); else left to the groups — a fleet at zero raised
// for them, and bridges started for them when the fleet has a bridge (else
// they wait for the next decision: a start on another pair, or the Spot
// group).
func (p *Fleetq) poolFailed(o Observation, s scaling.Settings, in scaling.PoolInput) Action {
	f := scaling.PoolStartFailed(in, *o.FailedStart, nil)
	p.avoided.Avoid(f)
	a := Keep
	if f.Retry != nil {
		a.PoolStarts = []scaling.PoolOrder{*f.Retry}
		return a
	}
	if o.Desired == 0 && o.OnDemandDesired == 0 {
		a.Desired = scaling.Need(s, f.Jobs)
	}
	if s.Bridge.Pool > 0 {
		live := 0
		for _, v := range o.Instances {
			if v.Bridge {
				live++
			}
		}
		live = max(live, o.OnDemandDesired)
		if n := scaling.BridgeStart(s, f.Jobs, 0, live); n > 0 {
			a.SetOnDemand, a.OnDemandDesired = true, o.OnDemandDesired+n
		}
	}
	return a
}
