package scaling

import (
	"fmt"
	"sort"
	"time"
)

// BridgeSettings are a fleet's bridge capacity (fleetconfig.Bridge): a warm
// pool of stopped instances on its On-Demand group.
type BridgeSettings struct {
	// Pool is the most bridge instances that run at once (the warm pool's
	// size); 0 turns the bridge off.
	Pool int
	// MaxLife bounds a bridge instance's life: past it the instance takes
	// no new job and is stopped once idle (0: no bound).
	MaxLife time.Duration
}

// WhyBridge is an idle bridge instance scaled in: its group puts it back
// into the warm pool stopped (ReuseOnScaleIn) instead of terminating it.
const WhyBridge = "bridge"

// BridgeInput is Decide's input for a fleet with bridge capacity: Instances
// and Workers cover both the Spot group and the bridge instances (the
// On-Demand group's, named by Bridges); Input.Desired is ignored (each
// group's desired capacity is given apart).
type BridgeInput struct {
	Input
	// Bridges names the instances of the On-Demand group that runs the
	// bridge.
	Bridges map[string]bool
	// SpotDesired and BridgeDesired are each group's desired capacity now.
	SpotDesired, BridgeDesired int
}

// BridgeDecision is the policy's answer for the Spot group and the bridge.
type BridgeDecision struct {
	Decision
	// SpotDesired and BridgeDesired are each group's desired capacity once
	// the victims are gone and the launches and bridge starts asked for.
	SpotDesired, BridgeDesired int
	// Start is how many bridge instances the decision starts from the pool.
	Start int
	// Drain names busy bridge instances past their life: they take no new
	// job and are stopped into the pool once idle.
	Drain []string
	// Bridges is the bridge instances running or starting after the
	// decision, and BridgeLeased the jobs they hold now.
	Bridges, BridgeLeased int
}

// BridgeStart is how many bridge instances to start for ready jobs that the
// free slots cannot take (the free slots of running workers and of bridge
// instances already running or starting), at most the pool's size less the
// live bridge instances. The wake on enqueue and DecideBridge both use it.
func BridgeStart(s Settings, ready, free, live int) int {
	if s.Bridge.Pool <= 0 {
		return 0
	}
	return max(0, min(ceilDiv(ready-free, s.Slots), s.Bridge.Pool-live))
}

// DecideBridge decides a fleet with bridge capacity. The Spot group is
// decided by Decide as without a bridge, except that jobs leased on bridge
// instances need no Spot capacity (they keep the idle clock running): the
// Spot group is raised for ready work as always, and once the bridges hold
// that work the Spot instances launched for it are idle workers like any.
// Bridge instances are started from the pool for ready jobs that the free
// slots of running workers and of bridges cannot take (BridgeStart). An
// idle bridge instance is stopped back into the pool as soon as the ready
// jobs do not need it (the Spot workers' free slots take them, or there
// are none), or once past its life; a busy one is never stopped: past its
// life it is drained (no new job) and stopped when idle.
func DecideBridge(in BridgeInput) BridgeDecision {
	s, now := in.Settings, in.Now
	slots := max(1, s.Slots)
	workers := byInstance(in.Workers)
	spot := in.Input
	spot.Instances, spot.Workers = make([]Instance, 0, len(in.Instances)), make([]Worker, 0, len(in.Workers))
	var bridges []Instance
	for _, inst := range in.Instances {
		if in.Bridges[inst.ID] {
			bridges = append(bridges, inst)
		} else {
			spot.Instances = append(spot.Instances, inst)
		}
	}
	spotFree := 0
	for _, w := range in.Workers {
		if in.Bridges[w.InstanceID] {
			continue
		}
		spot.Workers = append(spot.Workers, w)
		if !w.Draining && responsive(s, now, w) {
			spotFree += max(0, slots-w.Leases)
		}
	}

	var (
		victims            []Victim
		drain              []string
		idle               []Worker
		onBridges, free    int
		stoppedIdle, stale int
	)
	pending := max(0, in.BridgeDesired-len(bridges))
	free += pending * slots
	for _, inst := range bridges {
		w, ok := workers.of(inst.ID)
		seen := inst.FirstSeen
		if seen.IsZero() {
			seen = now
		}
		old := s.Bridge.MaxLife > 0 && now.Sub(seen) >= s.Bridge.MaxLife
		switch {
		case !ok:
			if s.BootTimeout > 0 && now.Sub(seen) >= s.BootTimeout {
				victims = append(victims, Victim{InstanceID: inst.ID, Why: WhyUnhealthy})
			} else {
				free += slots
			}
		case w.Draining:
			onBridges += max(0, w.Leases)
			if w.Leases <= 0 {
				why := WhyDrained
				if old {
					// Drained for its life, not for a fault: back to the pool.
					why, stale = WhyBridge, stale+1
				}
				victims = append(victims, Victim{InstanceID: inst.ID, WorkerID: w.ID, Why: why})
			}
		case !responsive(s, now, w):
			onBridges += max(0, w.Leases)
			if w.Leases <= 0 {
				victims = append(victims, Victim{InstanceID: inst.ID, WorkerID: w.ID, Why: WhyUnresponsive})
			}
		case w.Leases > 0:
			onBridges += w.Leases
			if old {
				drain = append(drain, inst.ID)
			} else {
				free += max(0, slots-w.Leases)
			}
		case old:
			victims = append(victims, Victim{InstanceID: inst.ID, WorkerID: w.ID, Why: WhyBridge})
			stale++
		default:
			idle = append(idle, w)
		}
	}
	// Idle bridges stay only for ready jobs nothing else will take.
	keep := ceilDiv(in.Ready-spotFree-free, slots)
	sort.Slice(idle, func(i, j int) bool { return idle[i].ID < idle[j].ID })
	for i, w := range idle {
		if i < keep {
			free += slots
			continue
		}
		victims = append(victims, Victim{InstanceID: w.InstanceID, WorkerID: w.ID, Why: WhyBridge})
		stoppedIdle++
	}
	live := len(bridges) + pending - len(victims)
	start := BridgeStart(s, in.Ready, spotFree+free, live)
	wanted := ceilDiv(in.Ready-spotFree-free, slots)

	spot.Desired = in.SpotDesired
	spot.Leased = max(0, in.Leased-onBridges)
	spot.Elsewhere = in.Elsewhere + onBridges
	spot.Expensive = nil
	d := Decide(spot)

	out := BridgeDecision{Decision: d, SpotDesired: d.Desired, BridgeDesired: live + start, Start: start, Drain: drain,
		Bridges: live + start, BridgeLeased: onBridges}
	out.Victims = append(append([]Victim(nil), d.Victims...), victims...)
	out.Desired = out.SpotDesired + out.BridgeDesired

	r := d.Reason
	if start > 0 {
		r = r.With(BridgeStartReason(start, in.Ready, d.Counts.Idle+min(keep, len(idle)), spotState(s, d)).String())
	}
	if s.Bridge.Pool > 0 && wanted > start {
		r = r.With(fmt.Sprintf("bridge pool of %d in use (%d more wanted)", s.Bridge.Pool, wanted-start))
	}
	if stoppedIdle > 0 {
		r = r.With(fmt.Sprintf("stop %d idle bridge into the pool (the work needs no bridge)", stoppedIdle))
	}
	if stale > 0 {
		r = r.With(fmt.Sprintf("stop %d bridge into the pool (past its %s)", stale, shortDuration(s.Bridge.MaxLife)))
	}
	if len(drain) > 0 {
		r = r.With(fmt.Sprintf("drain %d busy bridge past its %s (no new job)", len(drain), shortDuration(s.Bridge.MaxLife)))
	}
	for _, k := range []struct{ why, text string }{
		{WhyDrained, "drained"}, {WhyUnresponsive, "unresponsive"}, {WhyUnhealthy, "never registered"},
	} {
		if n := countWhy(victims, k.why); n > 0 {
			r = r.With(fmt.Sprintf("terminate %d bridge %s", n, k.text))
		}
	}
	out.Reason = r
	return out
}

// spotState is what the Spot group is doing for the work a bridge starts
// for.
func spotState(s Settings, d Decision) SpotState {
	switch {
	case d.Launch > 0 || d.Counts.Booting > 0:
		return SpotLaunching
	case d.Desired >= s.Max:
		return SpotAtMax(s.Max)
	}
	return SpotNotLaunching
}

func responsive(s Settings, now time.Time, w Worker) bool {
	return s.Unresponsive <= 0 || now.Sub(w.LastSeen) <= s.Unresponsive
}
