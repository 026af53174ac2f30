package sim

import (
	"slices"
	"strconv"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/forecast"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// epoch anchors the simulation's durations to the wall-clock times the
// production policy takes.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Fleetq is fleetq's own policy: pkg/domain/scaling.Decide, the very function the
// scaler runs every minute, fed what the scaler would read (job records,
// workers, the group's instances), plus the wake on enqueue dispatch does
// (raise a fleet whose desired capacity is zero to what the new work needs).
type Fleetq struct {
	settings   scaling.Settings
	lastActive time.Time
	// warmUntil ends the warm windows with the workload's last day of
	// arrivals: the hours the run goes on to finish its work are not days
	// the workload has, so warmth there would bill for demand that is not
	// modelled (zero: no end).
	warmUntil time.Duration
	// after is the wait before the On-Demand rung (0: none).
	after time.Duration
	// waitSLO is the rung's wait SLO (0: none).
	waitSLO time.Duration
	// forecast is the fleet's forecast (docs/scaling.md, "Forecast"), fed
	// as the scaler feeds it: the arrivals since the previous tick and the
	// ready + leased jobs at each tick, the spend booked per tick.
	forecast fleetconfig.Forecast
	hours    forecast.History
	budget   forecast.Budget
	arrived  int
	// avoided are the Spot pool's pairs avoided after failed starts (the
	// store's, in production).
	avoided scaling.Avoided
}

// WithForecast turns the forecast on (a disabled one leaves the fleet
// config's).
func (p *Fleetq) WithForecast(f fleetconfig.Forecast) *Fleetq {
	if f.Enabled {
		p.forecast = f
	}
	return p
}

// planForecast samples the tick and answers the decision's forecast, as
// the scaler's tick does (pkg/service/scaler/forecast.go).
func (p *Fleetq) planForecast(now time.Time, work, slots int, warm bool) scaling.Forecast {
	fc := p.forecast
	if !fc.Enabled {
		return scaling.Forecast{}
	}
	p.hours = p.hours.Observe(now, p.arrived, work)
	p.arrived = 0
	p.hours.Prune(now, fc.Lookback())
	if !warm {
		return scaling.Forecast{}
	}
	e := forecast.Expect(p.hours, now.Add(fc.LeadTime()), fc.Lookback())
	p.budget = p.budget.On(now)
	return scaling.Forecast{
		Instances: e.Instances(work, fc.LeadTime(), slots),
		Cap:       forecast.Cap(p.budget.Left(now, fc.Budget())),
		Expected:  e.String(),
	}
}

// WithFallback turns on the On-Demand rung with the given wait (zero
// leaves the fleet config's).
func (p *Fleetq) WithFallback(after time.Duration) *Fleetq {
	if after > 0 {
		p.after = after
	}
	return p
}

// WithWaitSLO sets the On-Demand rung's wait SLO (zero keeps the fleet's).
func (p *Fleetq) WithWaitSLO(d time.Duration) *Fleetq {
	if d > 0 {
		p.waitSLO = d
	}
	return p
}

// WithBridge gives the fleet bridge capacity: a warm pool of pool stopped
// instances on its On-Demand group, each living at most maxLife (zero
// pool leaves the fleet config's; a negative one turns the bridge off).
func (p *Fleetq) WithBridge(pool int, maxLife time.Duration) *Fleetq {
	switch {
	case pool < 0:
		p.settings.Bridge = scaling.BridgeSettings{}
	case pool > 0:
		p.settings.Bridge.Pool = pool
	}
	if maxLife > 0 && p.settings.Bridge.Pool > 0 {
		p.settings.Bridge.MaxLife = maxLife
	}
	return p
}

// bridgePool implements bridger.
func (p *Fleetq) bridgePool() int { return p.settings.Bridge.Pool }

// bridgeWake is the wake on enqueue of a fleet with a bridge: the bridge
// instances to start for ready jobs that the free slots of the running
// workers and of the bridges already running or starting cannot take
// (scaling.BridgeStart, as dispatch's waker calls it).
func (p *Fleetq) bridgeWake(o Observation, s scaling.Settings, ready int) int {
	free, live := 0, 0
	for _, v := range o.Instances {
		if v.PoolID != "" {
			continue // the Spot pool's jobs are not in ready
		}
		if v.Bridge {
			live++
		}
		switch {
		case v.Draining:
		case !v.Registered:
			if v.Bridge {
				free += o.Slots
			}
		default:
			free += max(0, o.Slots-v.Busy)
		}
	}
	if pending := o.OnDemandDesired - live; pending > 0 {
		free += pending * o.Slots
		live += pending
	}
	return scaling.BridgeStart(s, ready, free, live)
}

// endWarmAt implements workloadEnder.
func (p *Fleetq) endWarmAt(d time.Duration) { p.warmUntil = d }

// NewFleetq builds the policy from a fleet's settings (the fleet config's
// defaults when f is nil); slots, min and max come from each observation.
func NewFleetq(f *fleetconfig.Fleet) *Fleetq {
	p := &Fleetq{avoided: scaling.Avoided{}, settings: scaling.Settings{
		IdleWindow:   fleetconfig.DefaultIdleWindow,
		ScaleInGrace: fleetconfig.DefaultScaleInGrace,
		BootTimeout:  fleetconfig.DefaultBootTimeout,
		Unresponsive: 3 * fleetconfig.DefaultHeartbeatSeconds * time.Second,
	}}
	if f != nil {
		p.settings = scaling.SettingsOf(f)
		p.after = f.OnDemand.FallbackAfter.Std()
		p.waitSLO = f.OnDemand.WaitSLO.Std()
		p.forecast = f.Forecast
	}
	return p
}

// WithWarm adds warm windows to the fleet's own (the --warm flag).
func (p *Fleetq) WithWarm(ws ...fleetconfig.WarmWindow) *Fleetq {
	p.settings.Warm = append(slices.Clone(p.settings.Warm), ws...)
	return p
}

// hasOnDemandRung implements onDemandRung.
func (p *Fleetq) hasOnDemandRung() bool { return p.after > 0 }

// weighsSpot implements spotWeigher: the scaler weighs down interrupted
// Spot types and zones every tick.
func (*Fleetq) weighsSpot() bool { return true }

// Name implements Policy.
func (*Fleetq) Name() string { return "fleetq" }

// Interval implements Policy.
func (*Fleetq) Interval() time.Duration { return time.Minute }

// Victims implements Policy.
func (*Fleetq) Victims() VictimRule { return VictimNamed }

// settingsFor are the policy's settings for an observation: its fleet's
// slots, min and max, and the warm windows while the workload's days last.
func (p *Fleetq) settingsFor(o Observation) scaling.Settings {
	s := p.settings
	s.Slots, s.Min, s.Max = o.Slots, o.MinInstances, o.MaxInstances
	if p.warmUntil != 0 && o.Now >= p.warmUntil {
		s.Warm = nil
	}
	return s
}

// Decide implements Policy.
func (p *Fleetq) Decide(t Trigger, o Observation) Action {
	s := p.settingsFor(o)
	warm := p.warmUntil == 0 || o.Now < p.warmUntil
	ready := o.Queued
	if o.Capped {
		// Capacity for the work the tenants' caps let run, not for a
		// capped tenant's whole backlog.
		ready = max(0, o.Runnable-o.Leased)
	}
	switch t {
	case Arrival:
		p.arrived++
		a := Keep
		// A fleet with a Spot pool starts pool instances first, for what
		// the free slots cannot take (scaling.PoolStart, as dispatch's
		// waker calls it); the groups wake for the rest.
		leased := o.Leased
		if s.SpotPool.Enabled() {
			pd := scaling.PoolStart(p.poolInput(o, s, ready))
			a.PoolStarts = pd.Starts
			ready, leased = ready-pd.Covered, leased-pd.Leased
			s.Max = max(0, s.Max-pd.Live)
		}
		// Wake on enqueue: only a fleet at zero is raised, to what the
		// waiting work needs; everything else waits for the tick.
		if o.Desired == 0 && o.OnDemandDesired == 0 {
			p.lastActive = epoch.Add(o.Now)
			a.Desired = scaling.Need(s, ready+leased)
		}
		// A fleet with a bridge also starts bridges for what the free
		// slots cannot take, at zero or not.
		if n := p.bridgeWake(o, s, ready); n > 0 {
			a.SetOnDemand, a.OnDemandDesired = true, o.OnDemandDesired+n
		}
		return a
	case Idle:
		return Keep
	case PoolFailed:
		return p.poolFailed(o, s, p.poolInput(o, s, ready))
	}
	now := epoch.Add(o.Now)
	a := Action{}
	work := ready + o.Leased
	leased, elsewhere := o.Leased, 0
	if s.SpotPool.Enabled() {
		// The pool first: the groups are decided for the work beyond it.
		pd := scaling.DecidePool(p.poolInput(o, s, ready))
		a.PoolStarts = pd.Starts
		for _, x := range pd.Stops {
			a.PoolStops = append(a.PoolStops, x.ID)
		}
		for _, x := range pd.Ends {
			a.PoolEnds = append(a.PoolEnds, x.ID)
		}
		for _, x := range pd.Creates {
			a.PoolCreates = append(a.PoolCreates, x.Pair)
		}
		ready, leased, elsewhere = ready-pd.Covered, leased-pd.Leased, pd.Leased
		// The groups share the fleet's max with the pool's running
		// instances.
		s.Max = max(0, s.Max-pd.Live)
	}
	in := scaling.Input{Now: now, Settings: s, Ready: ready, Leased: leased, Desired: o.Desired, LastActiveAt: p.lastActive, Elsewhere: elsewhere}
	in.Forecast = p.planForecast(now, work, s.Slots, warm)
	in.Instances = make([]scaling.Instance, 0, len(o.Instances))
	in.Workers = make([]scaling.Worker, 0, len(o.Instances))
	for _, v := range o.Instances {
		if v.PoolID != "" {
			continue
		}
		id := strconv.Itoa(v.ID)
		state := scaling.StatePending
		if v.Registered {
			state = scaling.StateInService
		}
		in.Instances = append(in.Instances, scaling.Instance{ID: id, LifecycleState: state, FirstSeen: epoch.Add(v.LaunchedAt)})
		if v.Registered {
			in.Workers = append(in.Workers, scaling.Worker{ID: "w" + id, InstanceID: id, Leases: v.Busy,
				Draining: v.Draining, LastSeen: now, IdleSince: epoch.Add(v.IdleSince)})
		}
	}
	var d scaling.Decision
	shortOrPinned := o.SpotShortSince >= 0 || o.PinnedQueued+o.PinnedLeased > 0
	if s.Bridge.Pool > 0 && !(p.after > 0 && shortOrPinned) {
		// The bridge governs the On-Demand group unless the rung needs it
		// (Spot short, or jobs pinned to On-Demand).
		bin := scaling.BridgeInput{Input: in, Bridges: map[string]bool{}, SpotDesired: o.Desired, BridgeDesired: o.OnDemandDesired}
		for _, v := range o.Instances {
			if v.OnDemand {
				bin.Bridges[strconv.Itoa(v.ID)] = true
			}
		}
		bd := scaling.DecideBridge(bin)
		d = bd.Decision
		a.Desired, a.SetOnDemand, a.OnDemandDesired = bd.SpotDesired, true, bd.BridgeDesired
		for _, id := range bd.Drain {
			n, _ := strconv.Atoi(id)
			a.Drain = append(a.Drain, n)
		}
	} else if p.after > 0 {
		lin := scaling.LadderInput{Input: in, OnDemand: map[string]bool{}, SpotDesired: o.Desired,
			OnDemandDesired: o.OnDemandDesired, After: p.after,
			OnDemandOnlyReady: o.PinnedQueued, OnDemandOnlyLeased: o.PinnedLeased}
		for _, v := range o.Instances {
			if v.OnDemand {
				lin.OnDemand[strconv.Itoa(v.ID)] = true
			}
		}
		if o.SpotShortSince >= 0 {
			lin.SpotShortSince = epoch.Add(o.SpotShortSince)
		}
		if lin.WaitSLO = p.waitSLO; o.OldestQueued >= 0 {
			lin.OldestReadyWait = o.Now - o.OldestQueued
		}
		ld := scaling.DecideLadder(lin)
		d = ld.Decision
		a.Desired, a.SetOnDemand, a.OnDemandDesired = ld.SpotDesired, true, ld.OnDemandDesired
		for _, id := range ld.Drain {
			n, _ := strconv.Atoi(id)
			a.Drain = append(a.Drain, n)
		}
	} else {
		d = scaling.Decide(in)
		a.Desired = d.Desired
	}
	p.lastActive = d.LastActiveAt
	p.budget = p.budget.Spend(now, d.ForecastExtra, p.Interval())
	for _, v := range d.Victims {
		id, _ := strconv.Atoi(v.InstanceID)
		a.Terminate = append(a.Terminate, id)
	}
	return a
}
