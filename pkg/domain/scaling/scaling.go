package scaling

import (
	"fmt"
	"sort"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// Settings are the fleet settings the policy applies.
type Settings struct {
	Slots        int // jobs one instance runs at once
	Min, Max     int
	IdleWindow   time.Duration
	ScaleInGrace time.Duration
	BootTimeout  time.Duration
	// Unresponsive is how long a worker may go unseen before it no longer
	// counts as capacity (three heartbeats).
	Unresponsive time.Duration
	// Warm are the fleet's warm windows: while one is open the wanted
	// capacity is at least its minimum and its spare instances above the
	// work's need (warm.go).
	Warm []fleetconfig.WarmWindow
	// Bridge is the fleet's bridge capacity from a stopped pool (bridge.go);
	// zero when it has none.
	Bridge BridgeSettings
	// SpotPool is the fleet's stopped Spot pool (spotpool.go); zero when
	// it has none.
	SpotPool SpotPoolSettings
}

// SettingsOf reads the policy settings of a configured fleet.
func SettingsOf(f *fleetconfig.Fleet) Settings {
	return Settings{
		Slots:        f.SlotsPerInstance,
		Min:          f.MinInstances,
		Max:          f.MaxInstances,
		IdleWindow:   f.IdleWindow.Std(),
		ScaleInGrace: f.ScaleInGrace.Std(),
		BootTimeout:  f.BootTimeout.Std(),
		Unresponsive: 3 * f.HeartbeatInterval(),
		Warm:         f.Warm,
		Bridge:       BridgeSettings{Pool: f.Bridge.Pool, MaxLife: f.Bridge.MaxLife()},
		SpotPool:     spotPoolOf(f.SpotPool),
	}
}

func spotPoolOf(p fleetconfig.SpotPool) SpotPoolSettings {
	s := SpotPoolSettings{Size: p.Size, VolumeGB: p.VolumeGB, MaxAge: p.MaxAge(), Avoid: p.Avoid()}
	for _, pair := range p.Pairs {
		s.Pairs = append(s.Pairs, Pair{InstanceType: pair.InstanceType, Zone: pair.Zone})
	}
	return s
}

// Lifecycle states of a group's instance that fleetq tells apart (the EC2
// Auto Scaling service's own names; the dev stack's local fleet uses the
// same).
const (
	StateInService      = "InService"
	StatePending        = "Pending"
	StatePendingWait    = "Pending:Wait"
	StatePendingProceed = "Pending:Proceed"
)

// Instance is one instance of a fleet's group: an EC2 Auto Scaling group as
// pkg/aws/asg reads it, or the dev stack's local fleet. It is the one type every
// layer uses, from the Auto Scaling adapter through the scaler's capacity to
// the policy's input. The policy's input holds live instances only
// (terminating ones are left out by the caller).
type Instance struct {
	ID string
	// LifecycleState is where the group has the instance: StateInService,
	// one of the Pending states while it boots, or any other of the
	// service's states (Terminating, Standby, ...).
	LifecycleState string
	// HealthStatus is the group's health check result (Healthy, Unhealthy);
	// empty if the source reports none.
	HealthStatus string
	// InstanceType and AZ are the EC2 instance type and Availability Zone,
	// empty if the source reports none.
	InstanceType, AZ string
	// ProtectedFromScaleIn is true when the group may not pick the instance
	// to terminate on its own.
	ProtectedFromScaleIn bool
	// FirstSeen is when the control plane first saw the instance (the group
	// does not report launch times); zero means now. Sources leave it zero:
	// the scaler fills it from its records.
	FirstSeen time.Time
}

// InService reports whether the group has put the instance in service.
func (i Instance) InService() bool { return i.LifecycleState == StateInService }

// Booting reports whether the instance is still launching: Pending,
// Pending:Wait (a launch lifecycle hook holds it) or Pending:Proceed.
func (i Instance) Booting() bool {
	switch i.LifecycleState {
	case StatePending, StatePendingWait, StatePendingProceed:
		return true
	}
	return false
}

// Worker is a registered worker as the policy sees it.
type Worker struct {
	ID         string
	InstanceID string
	Leases     int
	Draining   bool // draining or revoked: takes no new work
	LastSeen   time.Time
	// IdleSince is when it last held no lease (meaningful when Leases is 0).
	IdleSince time.Time
}

// Input is everything one decision looks at.
type Input struct {
	Now      time.Time
	Settings Settings
	// Ready are queued jobs that may be leased now; Leased are running.
	// Jobs waiting out a retry backoff are not work yet.
	Ready, Leased int
	// Desired is the group's desired capacity now.
	Desired   int
	Instances []Instance
	Workers   []Worker
	// LastActiveAt is when the fleet last had ready or leased work (the
	// previous decision's LastActiveAt).
	LastActiveAt time.Time
	// Expensive names instances to shrink first when idle workers are
	// shrunk (On-Demand beside Spot: DecideLadder); nil for one group.
	Expensive map[string]bool
	// Forecast is what the fleet's own history expects ahead (forecast.go);
	// zero when the fleet has no forecast.
	Forecast Forecast
	// Elsewhere are leased jobs running outside these instances (on
	// instances of the Spot pool, DecidePool, or
	// bridge instances, DecideBridge): they keep the fleet's idle clock
	// running but need no capacity here.
	Elsewhere int
}

// Why a victim is terminated.
const (
	WhyIdle         = "idle"         // idle past the grace, not needed
	WhyDrained      = "drained"      // draining and done with its work
	WhyUnresponsive = "unresponsive" // not seen for three heartbeats, no lease
	WhyUnhealthy    = "unhealthy"    // never registered within the boot timeout
)

// Victim is an instance to terminate. WorkerID is empty when no worker
// registered on it. A victim with a worker must be claimed with the store's
// conditional drain (no lease) before it is terminated.
type Victim struct {
	InstanceID string `json:"instance_id"`
	WorkerID   string `json:"worker_id,omitempty"`
	Why        string `json:"why"`
}

// Counts are the numbers a decision was made from, for records and metrics.
type Counts struct {
	Ready        int `json:"ready"`
	Leased       int `json:"leased"`
	Need         int `json:"need"`
	Instances    int `json:"instances"`
	Booting      int `json:"booting"`
	Busy         int `json:"busy"`
	Idle         int `json:"idle"`
	Draining     int `json:"draining"`
	Unresponsive int `json:"unresponsive"`
	Unhealthy    int `json:"unhealthy"`
	// Capacity is booting plus active responsive instances, in instances.
	Capacity int `json:"capacity"`
}

// Decision is the policy's answer.
type Decision struct {
	// Desired is the group's desired capacity once the victims are
	// terminated (each termination lowers it by one) and launches asked for.
	Desired int
	// Launch is how many instances the decision adds.
	Launch  int
	Victims []Victim
	Reason  Reason
	// LastActiveAt carries the idle clock to the next decision.
	LastActiveAt time.Time
	Counts       Counts
	// ForecastExtra is the instances the forecast added to the wanted
	// capacity (what its budget is charged for).
	ForecastExtra int
}

// Need is the instances a backlog needs: ceil(work / slots), clamped to the
// fleet's min and max.
func Need(s Settings, work int) int {
	return clamp(s.Min, s.Max, ceilDiv(work, s.Slots))
}

// Decide applies the rules to one fleet.
func Decide(in Input) Decision {
	s := in.Settings
	c, victims, idle := classify(in)
	want, why, lastActive := target(in, c)
	want, why, extra := forecastFloor(in, want, why)

	// Shrink only by workers idle past the grace, longest idle first.
	var shrunk, kept int
	if excess := c.Capacity - want; excess > 0 {
		idleVictims := shrinkIdle(idle, excess, in.Now, s.ScaleInGrace, in.Expensive)
		victims = append(victims, idleVictims...)
		shrunk = len(idleVictims)
		kept = min(excess, c.Idle) - shrunk
	}

	// The group after terminations; launch up to the wanted capacity, within
	// the max (non-capacity instances still occupy the group) and up to the min.
	pending := max(0, in.Desired-len(in.Instances))
	remaining := len(in.Instances) + pending - len(victims)
	launch := max(0, want-(c.Capacity-shrunk))
	launch = min(launch, max(0, s.Max-remaining))
	launch = max(launch, s.Min-remaining)

	d := Decision{
		Desired:       remaining + launch,
		Launch:        launch,
		Victims:       victims,
		LastActiveAt:  lastActive,
		Counts:        c,
		ForecastExtra: extra,
	}
	d.Reason = reason(in, d, why, shrunk, kept)
	return d
}

// classify sorts the group's instances by what their workers do: booting
// (no worker yet, or a launch not started), busy, idle, draining,
// unresponsive, or unhealthy (never registered within the boot timeout).
// Drained, unresponsive and unhealthy instances without leases are victims
// at once; the idle workers are the candidates for shrinking.
func classify(in Input) (c Counts, victims []Victim, idle []Worker) {
	s, now := in.Settings, in.Now
	workers := byInstance(in.Workers)
	c.Ready, c.Leased, c.Instances = in.Ready, in.Leased, len(in.Instances)
	for _, inst := range in.Instances {
		w, ok := workers.of(inst.ID)
		switch {
		case !ok:
			seen := inst.FirstSeen
			if seen.IsZero() {
				seen = now
			}
			if s.BootTimeout > 0 && now.Sub(seen) >= s.BootTimeout {
				c.Unhealthy++
				victims = append(victims, Victim{InstanceID: inst.ID, Why: WhyUnhealthy})
			} else {
				c.Booting++
			}
		case w.Draining:
			c.Draining++
			if w.Leases <= 0 {
				victims = append(victims, Victim{InstanceID: inst.ID, WorkerID: w.ID, Why: WhyDrained})
			}
		case s.Unresponsive > 0 && now.Sub(w.LastSeen) > s.Unresponsive:
			c.Unresponsive++
			if w.Leases <= 0 {
				victims = append(victims, Victim{InstanceID: inst.ID, WorkerID: w.ID, Why: WhyUnresponsive})
			}
		case w.Leases > 0:
			c.Busy++
		default:
			c.Idle++
			idle = append(idle, w)
		}
	}
	// Launches the group was asked for but has not started are on the way.
	c.Booting += max(0, in.Desired-len(in.Instances))
	c.Capacity = c.Booting + c.Busy + c.Idle
	c.Need = ceilDiv(in.Ready+in.Leased, s.Slots)
	return c, victims, idle
}

// target is the capacity the fleet should have and why: what its work
// needs; the minimum once the idle window is over; else the capacity it has
// (it neither grows nor shrinks while the window runs). It also carries the
// idle clock: the last time the fleet had work.
func target(in Input, c Counts) (want int, why string, lastActive time.Time) {
	s, now := in.Settings, in.Now
	work := in.Ready + in.Leased
	lastActive = in.LastActiveAt
	if work+in.Elsewhere > 0 {
		lastActive = now
	}
	quiet := now.Sub(lastActive)
	switch {
	case work+in.Elsewhere > 0:
		want = clamp(s.Min, s.Max, c.Need)
		why = fmt.Sprintf("%d ready + %d leased need %d × %d slots", in.Ready, in.Leased, c.Need, max(1, s.Slots))
		if c.Need > s.Max {
			why += fmt.Sprintf(" (max %d)", s.Max)
		}
		if in.Elsewhere > 0 {
			why += fmt.Sprintf(" (%d more leased on bridges or pool instances)", in.Elsewhere)
		}
	case lastActive.IsZero():
		want, why = s.Min, "no work"
	case quiet >= s.IdleWindow:
		want, why = s.Min, fmt.Sprintf("no work for %s (idle window %s)", round(quiet), s.IdleWindow)
	default:
		want = clamp(s.Min, s.Max, c.Capacity)
		why = fmt.Sprintf("no work for %s of the %s idle window", round(quiet), s.IdleWindow)
	}
	if floor, warmWhy := warmFloor(s, now, work); floor > want {
		want, why = floor, why+"; "+warmWhy
	}
	return want, why, lastActive
}

// shrinkIdle picks up to excess idle workers as victims, expensive ones
// first, then longest idle first, skipping those idle for less than the grace.
func shrinkIdle(idle []Worker, excess int, now time.Time, grace time.Duration, expensive map[string]bool) []Victim {
	sort.Slice(idle, func(i, j int) bool {
		if ei, ej := expensive[idle[i].InstanceID], expensive[idle[j].InstanceID]; ei != ej {
			return ei
		}
		if !idle[i].IdleSince.Equal(idle[j].IdleSince) {
			return idle[i].IdleSince.Before(idle[j].IdleSince)
		}
		return idle[i].ID < idle[j].ID
	})
	var victims []Victim
	for _, w := range idle {
		if len(victims) == excess {
			break
		}
		if now.Sub(w.IdleSince) < grace {
			continue
		}
		victims = append(victims, Victim{InstanceID: w.InstanceID, WorkerID: w.ID, Why: WhyIdle})
	}
	return victims
}

func reason(in Input, d Decision, why string, shrunk, kept int) Reason {
	c := d.Counts
	r := decided(max(in.Desired, len(in.Instances)), d.Desired, why).
		With(fmt.Sprintf("have %d busy, %d idle, %d booting", c.Busy, c.Idle, c.Booting))
	if shrunk > 0 {
		r = r.With(fmt.Sprintf("terminate %d idle past %s", shrunk, in.Settings.ScaleInGrace))
	}
	if kept > 0 {
		r = r.With(fmt.Sprintf("keep %d idle within the %s grace", kept, in.Settings.ScaleInGrace))
	}
	for _, k := range []struct {
		why, text string
	}{
		{WhyDrained, "drained"},
		{WhyUnresponsive, "unresponsive"},
		{WhyUnhealthy, fmt.Sprintf("never registered in %s", in.Settings.BootTimeout)},
	} {
		if n := countWhy(d.Victims, k.why); n > 0 {
			r = r.With(fmt.Sprintf("terminate %d %s", n, k.text))
		}
	}
	if d.Launch > 0 {
		r = r.With(fmt.Sprintf("launch %d", d.Launch))
	}
	return r
}

// instanceWorkers finds an instance's worker (the last one registered from
// it) by its index in the workers, so the index holds no copies of them.
type instanceWorkers struct {
	ws []Worker
	at map[string]int
}

// byInstance indexes workers by their instance.
func byInstance(ws []Worker) instanceWorkers {
	at := make(map[string]int, len(ws))
	for i, w := range ws {
		if w.InstanceID != "" {
			at[w.InstanceID] = i
		}
	}
	return instanceWorkers{ws: ws, at: at}
}

// of is the instance's worker, if one registered from it.
func (x instanceWorkers) of(instanceID string) (Worker, bool) {
	i, ok := x.at[instanceID]
	if !ok {
		return Worker{}, false
	}
	return x.ws[i], true
}

func countWhy(vs []Victim, why string) int {
	n := 0
	for _, v := range vs {
		if v.Why == why {
			n++
		}
	}
	return n
}

func round(d time.Duration) time.Duration { return d.Round(time.Second) }

func ceilDiv(a, b int) int {
	if b <= 0 {
		b = 1
	}
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

func clamp(lo, hi, v int) int {
	if v > hi {
		v = hi
	}
	if v < lo {
		v = lo
	}
	return v
}
