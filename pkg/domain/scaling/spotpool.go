package scaling

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Pair is one instance type in one Availability Zone: what a stopped
// instance is and stays (a stopped instance cannot change type or zone).
type Pair struct{ InstanceType, Zone string }

// String is the pair as reasons name it: type/zone.
func (p Pair) String() string { return p.InstanceType + "/" + p.Zone }

// SpotPoolSettings are a fleet's stopped Spot pool (fleetconfig spot_pool;
// docs/scaling.md, "Cold start: the Spot pool"): stopped persistent Spot
// instances owned by fleetq outside any Auto Scaling group, started when
// work arrives and stopped back into the pool when idle.
type SpotPoolSettings struct {
	// Size is how many instances the pool keeps; 0 turns it off.
	Size int
	// Pairs are the instance type × zone pairs the pool spreads over.
	Pairs []Pair
	// VolumeGB is a pool instance's root volume, billed while it is stopped.
	VolumeGB int
	// MaxAge is how old a stopped instance may grow before it is replaced
	// (0: no bound).
	MaxAge time.Duration
	// Avoid is how long a pair whose start failed for want of Spot capacity
	// is not started.
	Avoid time.Duration
	// Idle is how long a running pool instance stays idle before it is
	// stopped back into the pool; zero (the default) stops it at the first
	// tick that finds it idle and not needed (docs/scaling.md, "Cold start:
	// the Spot pool", says why).
	Idle time.Duration
}

// Enabled reports whether the fleet has a Spot pool.
func (s SpotPoolSettings) Enabled() bool { return s.Size > 0 && len(s.Pairs) > 0 }

// PoolState is where a pool instance is.
type PoolState string

// The states of a pool instance.
const (
	// PoolPreparing: launched to be prepared (image, drivers on its
	// volume), then stopped into the pool.
	PoolPreparing PoolState = "preparing"
	// PoolStopped: in the pool, startable.
	PoolStopped PoolState = "stopped"
	// PoolStarting: started for work; its worker has not registered yet.
	PoolStarting PoolState = "starting"
	// PoolRunning: running (its worker registered or registering).
	PoolRunning PoolState = "running"
	// PoolStopping: being stopped back into the pool.
	PoolStopping PoolState = "stopping"
	// PoolInterrupted: EC2 stopped it on a Spot interruption; only EC2
	// starts it again (StartInstances on it is refused), so fleetq never
	// does.
	PoolInterrupted PoolState = "interrupted"
	// PoolGone: ended (its Spot request cancelled, the instance
	// terminated).
	PoolGone PoolState = "gone"
)

// PoolInstance is one instance of a fleet's Spot pool as the store records
// it.
type PoolInstance struct {
	ID    string
	Pair  Pair
	State PoolState
	// Since is when it entered its state; Created when it was launched.
	Since, Created time.Time
	// StartFor is the ready jobs its last start was for.
	StartFor int
}

// Avoided holds, per pair, until when it is not started (a start there
// failed for want of Spot capacity).
type Avoided map[Pair]time.Time

// Avoids reports whether pair p is avoided at now.
func (a Avoided) Avoids(p Pair, now time.Time) bool { return now.Before(a[p]) }

// PoolInput is what the pool's decisions look at.
type PoolInput struct {
	Now      time.Time
	Settings Settings
	// Ready are the ready jobs.
	Ready int
	// Free are the free slots outside the pool that take ready jobs now or
	// soon: of the groups' running workers, and of bridge or On-Demand
	// instances already starting for them. Group instances still booting
	// from a fresh launch are not counted: a pool start is faster.
	Free int
	// Others are the fleet's instances outside the pool (the groups'
	// instances, booting or running, and launches asked for): with them
	// the pool's starts keep the fleet within Settings.Max.
	Others int
	// Pool is the fleet's pool instances; Workers the workers (those
	// registered from pool instances are read, others ignored).
	Pool    []PoolInstance
	Workers []Worker
	// Avoided are the pairs not to start.
	Avoided Avoided
}

// PoolOrder is one decision about the pool with its reason: start, stop or
// end instance ID, or create one on Pair (ID empty).
type PoolOrder struct {
	ID   string
	Pair Pair
	// For is the ready jobs a start is for.
	For    int
	Reason Reason
}

// PoolDecision is the pool's decisions at one tick (DecidePool) or one
// enqueue (PoolStart: Starts only).
type PoolDecision struct {
	// Starts are stopped instances to start, each for up to a worker's
	// slots of ready jobs.
	Starts []PoolOrder
	// Stops are idle running instances to stop back into the pool (each
	// claimed with the store's conditional drain, no lease, first).
	Stops []PoolOrder
	// Ends are instances to end (cancel the Spot request, terminate):
	// stopped ones past their age, started ones never registered.
	Ends []PoolOrder
	// Creates are instances to launch, prepare and stop into the pool.
	Creates []PoolOrder
	// Covered are the ready jobs the pool takes after the decision (its
	// starting instances and the free slots of its running ones): the
	// groups are decided for the ready jobs beyond them.
	Covered int
	// Leased are the jobs leased on pool instances (Input.Elsewhere for
	// the groups: they keep the idle clock running).
	Leased int
	// Live are the pool's instances starting or running after the
	// decision: the groups are decided within Settings.Max less them.
	Live int
	// Reason sums the decision up in one line.
	Reason Reason
}

// Reason codes of the Spot pool's decisions.
const (
	ReasonPoolStart    ReasonCode = "pool-start"
	ReasonPoolFallback ReasonCode = "pool-fallback"
	ReasonPoolStop     ReasonCode = "pool-stop"
	ReasonPoolEnd      ReasonCode = "pool-end"
	ReasonPoolRefill   ReasonCode = "pool-refill"
	ReasonPoolHold     ReasonCode = "pool-hold"
)

// poolView is the pool sorted out for one decision.
type poolView struct {
	startable map[Pair][]PoolInstance // stopped, on any pair, longest stopped first
	live      map[Pair]int            // starting or running
	held      map[Pair]int            // every instance not gone
	free      int                     // the pool's slots that take ready jobs
	leased    int
	idle      []Worker // running, registered, no lease, idle for SpotPool.Idle
	ends      []PoolOrder
	interrupt int
}

func viewPool(in PoolInput) poolView {
	s, now := in.Settings, in.Now
	slots := max(1, s.Slots)
	workers := byInstance(in.Workers)
	v := poolView{startable: map[Pair][]PoolInstance{}, live: map[Pair]int{}, held: map[Pair]int{}}
	for _, p := range in.Pool {
		if p.State == PoolGone {
			continue
		}
		v.held[p.Pair]++
		switch p.State {
		case PoolStopped:
			if s.SpotPool.MaxAge > 0 && now.Sub(p.Created) >= s.SpotPool.MaxAge {
				v.ends = append(v.ends, PoolOrder{ID: p.ID, Pair: p.Pair, Reason: Reason{ReasonPoolEnd,
					fmt.Sprintf("pool end %s (%s): stopped, %s old, past its max age %s; replaced",
						p.ID, p.Pair, shortDuration(now.Sub(p.Created).Truncate(time.Hour)), shortDuration(s.SpotPool.MaxAge))}})
				v.held[p.Pair]--
				continue
			}
			v.startable[p.Pair] = append(v.startable[p.Pair], p)
		case PoolInterrupted:
			v.interrupt++
		case PoolStarting, PoolRunning:
			v.live[p.Pair]++
			w, ok := workers.of(p.ID)
			switch {
			case !ok:
				if s.BootTimeout > 0 && now.Sub(p.Since) >= s.BootTimeout {
					v.ends = append(v.ends, PoolOrder{ID: p.ID, Pair: p.Pair, Reason: Reason{ReasonPoolEnd,
						fmt.Sprintf("pool end %s (%s): started %s ago, never registered", p.ID, p.Pair, round(now.Sub(p.Since)))}})
					v.held[p.Pair]--
					v.live[p.Pair]--
					continue
				}
				v.free += slots
			case w.Draining || !responsive(s, now, w):
				// The interruption handler or health checks act on it.
				v.leased += max(0, w.Leases)
			case w.Leases > 0:
				v.leased += w.Leases
				v.free += max(0, slots-w.Leases)
			case now.Sub(w.IdleSince) < s.SpotPool.Idle:
				v.free += slots
			default:
				v.idle = append(v.idle, w)
			}
		}
	}
	for _, list := range v.startable {
		sort.Slice(list, func(i, j int) bool {
			if !list[i].Since.Equal(list[j].Since) {
				return list[i].Since.Before(list[j].Since)
			}
			return list[i].ID < list[j].ID
		})
	}
	return v
}

// PoolStart is the wake on enqueue of a fleet with a Spot pool: the stopped
// instances to start for ready jobs that the free slots (outside the pool,
// and of pool instances starting or running) cannot take, one start per
// worker's slots of jobs. Starts spread over the pairs (the pair with the
// fewest instances starting or running first), skip avoided pairs, and
// never start an interrupted instance. The tick's DecidePool starts alike.
func PoolStart(in PoolInput) PoolDecision {
	v := viewPool(in)
	// Idle instances take ready jobs on enqueue; the tick stops them.
	v.free += len(v.idle) * max(1, in.Settings.Slots)
	d := PoolDecision{Leased: v.leased, Starts: v.starts(in)}
	d.Covered = min(max(0, in.Ready-in.Free), v.free+startedSlots(in.Settings, d.Starts))
	d.Live = v.liveCount() + len(d.Starts)
	d.Reason = v.summary(in, d)
	return d
}

func (v *poolView) liveCount() int {
	n := 0
	for _, k := range v.live {
		n += k
	}
	return n
}

// starts picks the stopped instances to start for the ready jobs beyond
// the free slots.
func (v *poolView) starts(in PoolInput) []PoolOrder {
	s, now := in.Settings, in.Now
	slots := max(1, s.Slots)
	want := max(0, in.Ready-in.Free-v.free)
	room := -1 // starts the fleet's max leaves room for (-1: no max)
	if s.Max > 0 {
		room = max(0, s.Max-in.Others-v.liveCount())
	}
	if !s.SpotPool.Enabled() || want == 0 || room == 0 {
		return nil
	}
	live := make(map[Pair]int, len(v.live))
	for p, n := range v.live {
		live[p] = n
	}
	var out []PoolOrder
	for want > 0 && room != 0 {
		room--
		var best Pair
		found := false
		for _, p := range pairOrder(s.SpotPool.Pairs, v.startable) {
			if len(v.startable[p]) == 0 || in.Avoided.Avoids(p, now) {
				continue
			}
			if !found || live[p] < live[best] {
				best, found = p, true
			}
		}
		if !found {
			break
		}
		inst := v.startable[best][0]
		v.startable[best] = v.startable[best][1:]
		live[best]++
		n := min(want, slots)
		want -= n
		out = append(out, PoolOrder{ID: inst.ID, Pair: best, For: n,
			Reason: Reason{ReasonPoolStart, fmt.Sprintf("pool start %s (%s) for %d of %d ready jobs (%d free slots)",
				inst.ID, best, n, in.Ready, in.Free+v.free)}})
	}
	return out
}

// pairOrder is the configured pairs, then any other pair the pool holds
// (configuration changed), in a stable order.
func pairOrder(pairs []Pair, held map[Pair][]PoolInstance) []Pair {
	out := append([]Pair(nil), pairs...)
	seen := make(map[Pair]bool, len(pairs))
	for _, p := range pairs {
		seen[p] = true
	}
	var more []Pair
	for p := range held {
		if !seen[p] {
			more = append(more, p)
		}
	}
	sort.Slice(more, func(i, j int) bool { return more[i].String() < more[j].String() })
	return append(out, more...)
}

func startedSlots(s Settings, starts []PoolOrder) int { return len(starts) * max(1, s.Slots) }

// PoolFailure is a pool start that failed for want of Spot capacity
// (InsufficientInstanceCapacity): its pair is avoided until Until and the
// instance stays stopped in the pool. The start's jobs go to a stopped
// instance on another pair (Retry: one more start) when one is left, and
// only otherwise to the On-Demand fallback (Jobs: a bridge start, or the
// ladder's On-Demand launch).
type PoolFailure struct {
	Pair  Pair
	Until time.Time
	// Retry is the start on another pair that takes the failed start's
	// jobs; nil when none is left.
	Retry *PoolOrder
	// Jobs are the ready jobs handed to On-Demand: the failed start's when
	// there is no Retry, else none.
	Jobs   int
	Reason Reason
}

// PoolStartFailed decides a pool start that failed for want of Spot
// capacity: its pair is avoided for SpotPool.Avoid, and its jobs go to the
// longest stopped instance of another pair that in.Avoided does not avoid
// and that no start already ordered takes (claimed, by instance id; the
// pair with the fewest instances starting or running first), as PoolStart
// would pick it; only when there is none do they go to On-Demand. An
// interrupted instance is never started. The caller avoids the pair
// (Avoided.Avoid) before deciding a failure of the retry.
func PoolStartFailed(in PoolInput, start PoolOrder, claimed map[string]bool) PoolFailure {
	s, now := in.Settings, in.Now
	f := PoolFailure{Pair: start.Pair, Until: now.Add(s.SpotPool.Avoid)}
	head := fmt.Sprintf("pool start %s failed on %s (no Spot capacity): %s avoided for %s",
		start.ID, start.Pair, start.Pair, shortDuration(s.SpotPool.Avoid))
	v := viewPool(in)
	live := make(map[Pair]int, len(v.live))
	for p, n := range v.live {
		live[p] = n
	}
	pairs := make(map[string]Pair, len(in.Pool))
	for _, p := range in.Pool {
		pairs[p.ID] = p.Pair
	}
	for id := range claimed {
		if p, ok := pairs[id]; ok && id != start.ID {
			live[p]++ // ordered to start: as good as starting
		}
	}
	var best *PoolInstance
	for _, p := range pairOrder(s.SpotPool.Pairs, v.startable) {
		if p == start.Pair || in.Avoided.Avoids(p, now) {
			continue
		}
		for k := range v.startable[p] {
			if inst := v.startable[p][k]; !claimed[inst.ID] {
				if best == nil || live[p] < live[best.Pair] {
					best = &inst
				}
				break
			}
		}
	}
	if best == nil {
		f.Jobs = start.For
		f.Reason = Reason{ReasonPoolFallback, fmt.Sprintf("%s; %d jobs to On-Demand", head, start.For)}
		return f
	}
	f.Retry = &PoolOrder{ID: best.ID, Pair: best.Pair, For: start.For, Reason: Reason{ReasonPoolStart,
		fmt.Sprintf("pool start %s (%s) for the %d jobs of %s's failed start", best.ID, best.Pair, start.For, start.ID)}}
	f.Reason = Reason{ReasonPoolFallback, fmt.Sprintf("%s; its %d jobs to %s (%s)", head, start.For, best.ID, best.Pair)}
	return f
}

// Avoid records a failure's pair as avoided until its end.
func (a Avoided) Avoid(f PoolFailure) {
	if f.Until.After(a[f.Pair]) {
		a[f.Pair] = f.Until
	}
}

// DecidePool is the tick's decision for a fleet's Spot pool:
//   - start stopped instances for ready jobs nothing else takes (as
//     PoolStart on enqueue);
//   - stop idle running instances back into the pool: a registered worker
//     with no lease, idle for SpotPool.Idle (zero: at all), that the ready
//     jobs beyond the other free slots do not need (the longest idle
//     first); an instance holding a lease is never stopped, and a draining
//     or unresponsive one is left to the interruption handler and the
//     health checks;
//   - end a stopped instance past MaxAge, and a started one whose worker
//     never registered within the boot timeout;
//   - create instances to bring the pool back to Size, each on the
//     least-filled pair not avoided. Interrupted instances count in the
//     pool's size (EC2 starts them again when it has capacity) but are not
//     startable.
func DecidePool(in PoolInput) PoolDecision {
	s, now := in.Settings, in.Now
	slots := max(1, s.Slots)
	v := viewPool(in)
	d := PoolDecision{Leased: v.leased, Ends: v.ends}
	// Idle instances stay for the ready jobs nothing else takes.
	keep := ceilDiv(in.Ready-in.Free-v.free, slots)
	sort.Slice(v.idle, func(i, j int) bool {
		if !v.idle[i].IdleSince.Equal(v.idle[j].IdleSince) {
			return v.idle[i].IdleSince.Before(v.idle[j].IdleSince)
		}
		return v.idle[i].ID < v.idle[j].ID
	})
	// Keep the most recently idle; stop the rest, longest idle first.
	stop := max(0, len(v.idle)-max(0, keep))
	for i, w := range v.idle {
		if i >= stop {
			v.free += slots
			continue
		}
		d.Stops = append(d.Stops, PoolOrder{ID: w.InstanceID, Pair: pairOf(in.Pool, w.InstanceID), Reason: Reason{ReasonPoolStop,
			fmt.Sprintf("pool stop %s: idle %s, no ready job needs it", w.InstanceID, round(now.Sub(w.IdleSince)))}})
	}
	for _, o := range d.Stops {
		v.live[o.Pair]--
	}
	d.Starts = v.starts(in)
	d.Covered = min(max(0, in.Ready-in.Free), v.free+startedSlots(s, d.Starts))
	d.Live = v.liveCount() + len(d.Starts)
	d.Creates = refill(in, v.held)
	d.Reason = v.summary(in, d)
	return d
}

func pairOf(pool []PoolInstance, id string) Pair {
	for _, p := range pool {
		if p.ID == id {
			return p.Pair
		}
	}
	return Pair{}
}

// refill creates instances up to the pool's size, each on the least-filled
// pair not avoided (ties in the configured order).
func refill(in PoolInput, held map[Pair]int) []PoolOrder {
	s, now := in.Settings.SpotPool, in.Now
	if !s.Enabled() {
		return nil
	}
	have := 0
	count := make(map[Pair]int, len(held))
	for p, n := range held {
		have += n
		count[p] = n
	}
	var out []PoolOrder
	for ; have < s.Size; have++ {
		var best Pair
		found := false
		for _, p := range s.Pairs {
			if in.Avoided.Avoids(p, now) {
				continue
			}
			if !found || count[p] < count[best] {
				best, found = p, true
			}
		}
		if !found {
			break
		}
		out = append(out, PoolOrder{Pair: best, Reason: Reason{ReasonPoolRefill,
			fmt.Sprintf("pool refill on %s: %d of %d in the pool, %d on this pair (the least filled)", best, have, s.Size, count[best])}})
		count[best]++
	}
	return out
}

// summary is the decision's one line: what it does, and what the pool
// could not do.
func (v *poolView) summary(in PoolInput, d PoolDecision) Reason {
	s := in.Settings
	slots := max(1, s.Slots)
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", what, n))
		}
	}
	add(len(d.Starts), "start")
	add(len(d.Stops), "stop")
	add(len(d.Ends), "end")
	add(len(d.Creates), "create")
	r := Reason{ReasonPoolHold, "pool: hold"}
	for _, k := range []struct {
		orders []PoolOrder
		code   ReasonCode
	}{{d.Starts, ReasonPoolStart}, {d.Stops, ReasonPoolStop}, {d.Ends, ReasonPoolEnd}, {d.Creates, ReasonPoolRefill}} {
		if len(k.orders) > 0 {
			// The first thing the decision does names it.
			r = Reason{k.code, "pool: " + strings.Join(parts, ", ")}
			break
		}
	}
	if short := ceilDiv(in.Ready-in.Free-v.free, slots) - len(d.Starts); s.SpotPool.Enabled() && short > 0 {
		var avoided []string
		for _, p := range s.SpotPool.Pairs {
			if in.Avoided.Avoids(p, in.Now) {
				avoided = append(avoided, fmt.Sprintf("%s until %s", p, in.Avoided[p].Format("15:04:05")))
			}
		}
		why := fmt.Sprintf("%d more wanted, no stopped instance on a pair not avoided", short)
		if s.Max > 0 && in.Others+d.Live >= s.Max {
			why = fmt.Sprintf("%d more wanted, the fleet at its max %d", short, s.Max)
		}
		if len(avoided) > 0 {
			why += " (avoided: " + strings.Join(avoided, ", ") + ")"
		}
		r = r.With(why)
	}
	if v.interrupt > 0 {
		r = r.With(fmt.Sprintf("%d interrupted (EC2 starts them again)", v.interrupt))
	}
	return r
}
