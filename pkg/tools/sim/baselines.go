package sim

import "time"

// VisibleOnly is the seed investigation's queue-depth Lambda with FAST_ACK:
// every minute, desired = clamp(min, max, min(visible, 5)) while any message
// is visible or in flight; after 20 minutes of both at zero, desired = min.
// With FAST_ACK a worker deletes its message at receive, so a running job
// is neither visible nor in flight. The group picks its own victims.
type VisibleOnly struct {
	MaxBacklogAdd int           // 5
	StableZero    time.Duration // 20 minutes
	zeroSince     time.Duration
	zeroSeen      bool
}

// NewVisibleOnly returns the seed's configuration.
func NewVisibleOnly() *VisibleOnly {
	return &VisibleOnly{MaxBacklogAdd: 5, StableZero: 20 * time.Minute}
}

// Name implements Policy.
func (*VisibleOnly) Name() string { return "visible-only" }

// Interval implements Policy.
func (*VisibleOnly) Interval() time.Duration { return time.Minute }

// Victims implements Policy.
func (*VisibleOnly) Victims() VictimRule { return VictimRandom }

// Decide implements Policy.
func (p *VisibleOnly) Decide(t Trigger, o Observation) Action {
	if t != Tick {
		return Keep
	}
	visible, inflight := o.Queued, 0 // FAST_ACK: received messages are gone
	if visible > 0 || inflight > 0 {
		p.zeroSeen = false
		return Action{Desired: clamp(min(visible, p.MaxBacklogAdd), o.MinInstances, o.MaxInstances)}
	}
	if !p.zeroSeen {
		p.zeroSeen, p.zeroSince = true, o.Now
		return Keep
	}
	if o.Now-p.zeroSince >= p.StableZero {
		p.zeroSeen = false
		return Action{Desired: o.MinInstances}
	}
	return Keep
}

// TargetTracking is the ComfyUI ADR's policy: a step alarm takes the fleet
// from 0 to 1 when QueueDepth (queued + leased) > 0; target tracking keeps
// BacklogPerInstance (QueueDepth / active workers) at 2, with CloudWatch's
// alarm timing: metrics published each minute, 3 datapoints above target
// to scale out, 15 below 90% of it to scale in; after 15 minutes of
// QueueDepth = 0 the fleet goes to zero. The group picks its own victims.
type TargetTracking struct {
	Target    float64
	OutPoints int
	InPoints  int
	ToZero    time.Duration

	above, below int
	zeroSince    time.Duration
	zeroSeen     bool
	pending      *Observation // last minute's published metrics
}

// NewTargetTracking returns the ADR's configuration.
func NewTargetTracking() *TargetTracking {
	return &TargetTracking{Target: 2, OutPoints: 3, InPoints: 15, ToZero: 15 * time.Minute}
}

// Name implements Policy.
func (*TargetTracking) Name() string { return "target-tracking" }

// Interval implements Policy.
func (*TargetTracking) Interval() time.Duration { return time.Minute }

// Victims implements Policy.
func (*TargetTracking) Victims() VictimRule { return VictimRandom }

// Decide implements Policy.
func (p *TargetTracking) Decide(t Trigger, now Observation) Action {
	if t != Tick {
		return Keep
	}
	// Alarms evaluate the datapoint published a minute earlier.
	o := p.pending
	cur := now
	p.pending = &cur
	if o == nil {
		return Keep
	}
	depth := o.Queued + o.Leased
	active := 0
	for _, in := range o.Instances {
		if in.Registered && !in.Draining {
			active++
		}
	}
	if depth == 0 {
		p.above, p.below = 0, 0
		if !p.zeroSeen {
			p.zeroSeen, p.zeroSince = true, o.Now
		}
		if now.Now-p.zeroSince >= p.ToZero && now.Desired > 0 {
			return Action{Desired: 0}
		}
		return Keep
	}
	p.zeroSeen = false
	if now.Desired == 0 {
		return Action{Desired: 1} // the step alarm
	}
	metric := float64(depth)
	if active > 0 {
		metric /= float64(active)
	}
	want := clamp(int(ceilF(float64(max(active, 1))*metric/p.Target)), 1, o.MaxInstances)
	switch {
	case metric > p.Target:
		p.above++
		p.below = 0
		if p.above >= p.OutPoints && want > now.Desired {
			p.above = 0
			return Action{Desired: want}
		}
	case metric < 0.9*p.Target:
		p.below++
		p.above = 0
		if p.below >= p.InPoints && want < now.Desired {
			p.below = 0
			return Action{Desired: want}
		}
	default:
		p.above, p.below = 0, 0
	}
	return Keep
}

func ceilF(f float64) float64 {
	i := float64(int(f))
	if f > i {
		return i + 1
	}
	return i
}

// KEDA is the KEDA SQS scaler with scaleOnInFlight: every 30 seconds,
// replicas = ceil((visible + in flight) / queueLength) with queueLength 1;
// the HPA scales down only to the highest recommendation of the last 300
// seconds (its stabilization window), and to zero after the 300-second
// cooldown with no messages. Leased dispatch keeps a running job's message
// in flight. The ReplicaSet removes the newest pods.
type KEDA struct {
	QueueLength int
	Window      time.Duration
	Cooldown    time.Duration

	recs       []rec
	lastActive time.Duration
	active     bool
}

type rec struct {
	at time.Duration
	n  int
}

// NewKEDA returns the configuration the issue names.
func NewKEDA() *KEDA {
	return &KEDA{QueueLength: 1, Window: 300 * time.Second, Cooldown: 300 * time.Second}
}

// Name implements Policy.
func (*KEDA) Name() string { return "keda" }

// Interval implements Policy.
func (*KEDA) Interval() time.Duration { return 30 * time.Second }

// Victims implements Policy.
func (*KEDA) Victims() VictimRule { return VictimNewest }

// Decide implements Policy.
func (p *KEDA) Decide(t Trigger, o Observation) Action {
	if t != Tick {
		return Keep
	}
	msgs := o.Queued + o.Leased
	if msgs > 0 {
		p.active, p.lastActive = true, o.Now
	}
	if msgs == 0 {
		if p.active && o.Now-p.lastActive >= p.Cooldown {
			p.active, p.recs = false, nil
			return Action{Desired: 0}
		}
		if !p.active {
			return Keep
		}
	}
	want := clamp(ceilDiv(msgs, p.QueueLength), max(o.MinInstances, 1), o.MaxInstances)
	p.recs = append(p.recs, rec{o.Now, want})
	for len(p.recs) > 0 && o.Now-p.recs[0].at > p.Window {
		p.recs = p.recs[1:]
	}
	stable := 0
	for _, r := range p.recs {
		stable = max(stable, r.n)
	}
	if want > o.Desired {
		return Action{Desired: want}
	}
	return Action{Desired: stable}
}

// Oracle is the lower bound: it knows each job the moment it arrives,
// launches an instance for it when no slot is free (still paying the boot
// delay), and terminates an instance the moment it has nothing to do.
type Oracle struct{}

// Name implements Policy.
func (Oracle) Name() string { return "oracle" }

// Interval implements Policy.
func (Oracle) Interval() time.Duration { return 0 }

// Victims implements Policy.
func (Oracle) Victims() VictimRule { return VictimNamed }

// Decide implements Policy.
func (Oracle) Decide(t Trigger, o Observation) Action {
	need := clamp(ceilDiv(o.Queued+o.Leased, o.Slots), o.MinInstances, o.MaxInstances)
	live := 0
	var idle []int
	for _, in := range o.Instances {
		if in.Draining {
			continue
		}
		live++
		if in.Registered && in.Busy == 0 {
			idle = append(idle, in.ID)
		}
	}
	if need > live {
		return Action{Desired: need}
	}
	a := Keep
	for i := 0; i < live-need && i < len(idle); i++ {
		a.Terminate = append(a.Terminate, idle[i])
	}
	return a
}
