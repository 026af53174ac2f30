package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/fairshare"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Options configure the simulated fleet and world.
type Options struct {
	// Fleet, when set, supplies the fleet's settings (slots, min/max
	// instances, and what fleetq's policy reads: idle window, scale-in
	// grace, boot timeout, heartbeat). Slots, MinInstances and MaxInstances
	// below override it when set.
	Fleet        *fleetconfig.Fleet
	Slots        int
	MinInstances int
	MaxInstances int
	// BootMin and BootMax bound the uniform delay from launch to a
	// registered worker (default 3 and 5 minutes, as in the seed timeline).
	BootMin, BootMax time.Duration
	// Warm are warm windows added to the fleet's own for fleetq's policy
	// (fleetq simulate --warm).
	Warm []fleetconfig.WarmWindow
	// Forecast, when enabled, is fleetq's forecast of the fleet's own
	// arrivals (fleetq simulate --forecast); else the fleet config's.
	Forecast fleetconfig.Forecast
	// SpotRate is Spot interruptions per instance-hour (0: none).
	SpotRate float64
	// SpotHotspots interrupt one instance type in one zone at their own
	// rate instead of SpotRate. Spot instances launch on the fleet's
	// instance types (DefaultSpotTypes when it names none) in SpotZones.
	SpotHotspots []Hotspot
	// NoWeigh makes fleetq's policy place Spot launches as the baselines
	// do (the first type, zones in turn) instead of weighing down the
	// types and zones interrupted recently (scaling.WeighSpot).
	NoWeigh bool
	// PricePerHour is the cost of one instance-hour (the Spot group's).
	PricePerHour float64
	// OnDemandPricePerHour is the cost of one On-Demand instance-hour
	// (default: the fleet config's on_demand.price_per_hour, else
	// DefaultOnDemandPrice).
	OnDemandPricePerHour float64
	// SpotShortages are spans in which no Spot capacity is to be had: Spot
	// launches fail (instances already running stay).
	SpotShortages []Span
	// PreemptionCap is how many Spot interruptions a job may take: the next
	// one makes it dead, or, under a policy with an On-Demand rung, it is
	// leased only by On-Demand instances from then on (default: the fleet
	// config's preemption_cap, else its default).
	PreemptionCap int
	// FairShare makes free slots take jobs by tenant (pkg/domain/fairshare:
	// the lowest leased share first, within TenantMaxLeased) instead of
	// oldest first across tenants.
	FairShare bool
	// TenantMaxLeased caps each tenant's leased jobs under FairShare (0:
	// no cap).
	TenantMaxLeased int
	// FallbackAfter turns on fleetq's On-Demand rung with this wait (the
	// fleet config's on_demand.fallback_after when zero).
	FallbackAfter time.Duration
	// WaitSLO moves fleetq's launches to On-Demand sooner: once Spot is
	// short and the oldest queued job has waited past it (the fleet
	// config's on_demand.wait_slo when zero).
	WaitSLO time.Duration
	// Bridge is fleetq's bridge capacity (fleetq simulate --bridge): a warm
	// pool of this many stopped (or hibernated) instances on the On-Demand
	// group, started when work arrives that running workers cannot take
	// (the fleet config's bridge.pool when zero).
	Bridge int
	// BridgeState is the pool's state, stopped (default) or hibernated.
	BridgeState string
	// BridgeMaxLife bounds a bridge instance's life (default the fleet
	// config's bridge.max_minutes, else 30 minutes).
	BridgeMaxLife time.Duration
	// BridgeStartMin and BridgeStartMax bound the uniform delay from a
	// bridge start to a registered worker (defaults by state:
	// DefaultStoppedStart, DefaultHibernatedStart).
	BridgeStartMin, BridgeStartMax time.Duration
	// BridgeVolumeGB is the root volume each pooled instance keeps (the
	// fleet config's root_volume_gb, else 100), billed at
	// EBSPricePerGBMonth (default DefaultEBSPrice) for the workload's days.
	BridgeVolumeGB     int
	EBSPricePerGBMonth float64
	// SpotPool is fleetq's stopped Spot pool (fleetq simulate --spot-pool;
	// docs/simulation.md, "Cold start: the Spot pool"): this many stopped
	// persistent Spot instances spread over SpotPoolPairs (default
	// DefaultPoolPairs), started when work arrives, billed at the Spot
	// price while they run (a minute at least per start) and for their
	// volumes (DefaultPoolVolumeGB) at EBSPricePerGBMonth always (the
	// fleet config's spot_pool when zero; negative: none).
	SpotPool      int
	SpotPoolPairs []scaling.Pair
	// PoolStartMin and PoolStartMax bound the uniform delay from a pool
	// start to a registered worker (default DefaultStoppedStart).
	PoolStartMin, PoolStartMax time.Duration
	// PoolStartFailures are the shares of pool starts that fail for want
	// of Spot capacity, per pair.
	PoolStartFailures []PoolFailure
	// PoolIdle is how long an idle pool instance runs on before it is
	// stopped (scaling.SpotPoolSettings.Idle; zero: at the first tick
	// that finds it idle).
	PoolIdle time.Duration
	// PoolRestart is how long EC2 keeps an interrupted pool instance
	// stopped before it starts it again (default DefaultPoolRestart).
	PoolRestart time.Duration
	Seed        uint64
	// Horizon ends the simulation (default: a day after the last arrival).
	Horizon time.Duration
	// Sample is the timeline's resolution for plots (default 1 minute).
	Sample time.Duration
	// Estimates measures fleetq's start estimates against the actual
	// leases (estimates.go; fleetq simulate --estimates).
	Estimates bool
}

func (o *Options) defaults(w Workload) {
	if f := o.Fleet; f != nil {
		if o.Slots < 1 {
			o.Slots = f.SlotsPerInstance
		}
		if o.MinInstances == 0 {
			o.MinInstances = f.MinInstances
		}
		if o.MaxInstances < 1 {
			o.MaxInstances = f.MaxInstances
		}
	}
	if o.Slots < 1 {
		o.Slots = max(w.Slots, 1)
	}
	if o.MaxInstances < 1 {
		o.MaxInstances = max(w.MaxInstances, 1)
	}
	if o.BootMin <= 0 {
		o.BootMin = 3 * time.Minute
	}
	if o.BootMax < o.BootMin {
		o.BootMax = max(5*time.Minute, o.BootMin)
	}
	if o.OnDemandPricePerHour <= 0 {
		o.OnDemandPricePerHour = DefaultOnDemandPrice
		if o.Fleet != nil && o.Fleet.OnDemand.PricePerHour > 0 {
			o.OnDemandPricePerHour = o.Fleet.OnDemand.PricePerHour
		}
	}
	if o.PreemptionCap <= 0 {
		o.PreemptionCap = fleetconfig.DefaultPreemptionCap
		if o.Fleet != nil && o.Fleet.PreemptionCap > 0 {
			o.PreemptionCap = o.Fleet.PreemptionCap
		}
	}
	o.bridgeDefaults()
	o.poolDefaults()
	if o.Sample <= 0 {
		o.Sample = time.Minute
	}
	if o.Horizon <= 0 {
		last := time.Duration(0)
		if n := len(w.Jobs); n > 0 {
			last = w.Jobs[n-1].Arrival
		}
		o.Horizon = last + 24*time.Hour
	}
}

// onDemandRung is a policy that can give jobs On-Demand capacity.
type onDemandRung interface{ hasOnDemandRung() bool }

// workloadEnder is a policy told when the workload's last day of arrivals
// ends (the end of the day of its last arrival).
type workloadEnder interface{ endWarmAt(time.Duration) }

// Span is a stretch of simulated time, From inclusive, To exclusive.
type Span struct{ From, To time.Duration }

// ParseSpan reads FROM-TO, two durations from the start ("10h-12h").
func ParseSpan(v string) (Span, error) {
	a, b, ok := strings.Cut(v, "-")
	from, err1 := time.ParseDuration(a)
	to, err2 := time.ParseDuration(b)
	if !ok || err1 != nil || err2 != nil || from < 0 || to <= from {
		return Span{}, fmt.Errorf("span %q: want FROM-TO, durations from the start with FROM < TO (e.g. 10h-12h)", v)
	}
	return Span{From: from, To: to}, nil
}

// DefaultOnDemandPrice is the On-Demand price of a g5.xlarge in us-east-1,
// dollars per hour, as AWS lists it (docs/simulation.md).
const DefaultOnDemandPrice = 1.006

// spotWarning is the notice EC2 gives before reclaiming a Spot instance.
const spotWarning = 2 * time.Minute

type jobState struct {
	spec    JobSpec
	id      int
	start   time.Duration // first start, -1 before
	done    bool
	run     int // increments on every start, so stale completions are ignored
	on      int // instance running it, -1 when not running
	started time.Duration
	ran     time.Duration // time on an instance over all its runs
	// preempted counts its Spot interruptions; pinned is set at the cap
	// when the policy has an On-Demand rung; dead when it has not.
	preempted    int
	pinned, dead bool
}

type instance struct {
	id         int
	launched   time.Duration
	readyAt    time.Duration
	registered bool
	warned     bool
	gone       bool
	ended      time.Duration
	jobs       []*jobState
	idleSince  time.Duration
	busySince  time.Duration
	busyTotal  time.Duration
	onDemand   bool
	// bridge is an On-Demand instance of a group with a warm pool: started
	// from the pool (or launched when the pool had none ready), it goes
	// back into the pool stopped when scaled in.
	bridge   bool
	fresh    bool // a bridge launched fresh: the pool had none ready
	draining bool // told to take no new work (it still counts in its group)
	// typ and zone are a Spot instance's type and availability zone.
	typ, zone string
	// member is the Spot pool's instance this one runs (nil for the
	// groups' instances).
	member *poolMember
}

func (in *instance) live() bool { return !in.gone && !in.warned }

type eventKind int

const (
	evArrival eventKind = iota
	evReady
	evDone
	evWarn
	evReclaim
	evTick
	evSample
	evSpotBack
	evPoolStopped
	evPoolBack
)

type event struct {
	at   time.Duration
	seq  int
	kind eventKind
	job  *jobState
	inst int
	run  int
	// member is a Spot pool instance's event's (evPoolStopped, evPoolBack).
	member *poolMember
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type engine struct {
	opt    Options
	pol    Policy
	rng    *rand.Rand
	now    time.Duration
	events queue
	seq    int

	jobs      []*jobState
	waiting   []*jobState // queued, oldest first (requeued work goes first)
	insts     map[int]*instance
	order     []int // the ids of the instances not gone, in launch order
	nextInst  int
	desired   int // the Spot group's
	spot      *spotPlacement
	weighs    bool // the policy weighs down interrupted types and zones
	odDesired int  // the On-Demand group's
	// pool holds, for each stopped instance of the bridge's warm pool, when
	// it can be started (it is stopped by then); poolSize is its size.
	pool     []time.Duration
	poolSize int
	// members are the Spot pool's instances, poolCfg its settings; failed
	// is the pool start that failed, while the policy decides its fallback.
	members   []*poolMember
	poolCfg   scaling.SpotPoolSettings
	failed    *scaling.PoolOrder
	idleStart time.Duration // start of a cold episode, -1 when none
	// spotShortSince is when Spot launches began failing, -1 while they do
	// not; spotBackAt when a Spot launch last succeeded after a failure.
	spotShortSince, spotBackAt time.Duration

	res      Result
	waits    []time.Duration
	byTenant map[string][]time.Duration
	ttfl     []time.Duration
	timeline []Sample
	// planner leases jobs to polling instances (leasing.go).
	planner *lease.Planner
	// est makes and keeps the start estimates (nil: not measured).
	est *estimator
	// lastTick is when the policy's tick last ran (0: not yet).
	lastTick time.Duration
}

// Run simulates the workload under one policy.
func Run(w Workload, p Policy, o Options) Result {
	o.defaults(w)
	e := &engine{
		opt: o, pol: p, rng: rand.New(rand.NewPCG(o.Seed, uint64(len(p.Name())))),
		insts: map[int]*instance{}, byTenant: map[string][]time.Duration{}, idleStart: -1, desired: o.MinInstances, spotShortSince: -1,
		spot: newSpotPlacement(o),
	}
	e.planner = e.newPlanner()
	e.est = e.newEstimator()
	if sw, ok := p.(spotWeigher); ok && !o.NoWeigh {
		e.weighs = sw.weighsSpot()
	}
	if b, ok := p.(bridger); ok {
		e.poolSize = b.bridgePool()
		e.pool = make([]time.Duration, e.poolSize) // filled at deploy: every one ready
	}
	if sp, ok := p.(spotPooler); ok && sp.spotPool().Enabled() {
		e.poolCfg = sp.spotPool()
		e.fillPool()
	}
	for _, sp := range o.SpotShortages {
		e.push(&event{at: sp.To, kind: evSpotBack})
	}
	e.res = Result{Policy: p.Name(), Workload: w.Name}
	if len(w.Jobs) > 0 {
		e.res.WorkloadEnd = w.Jobs[len(w.Jobs)-1].Arrival.Truncate(day) + day
	}
	if we, ok := p.(workloadEnder); ok && len(w.Jobs) > 0 {
		we.endWarmAt(w.Jobs[len(w.Jobs)-1].Arrival.Truncate(day) + day)
	}
	for i, js := range w.Jobs {
		j := &jobState{spec: js, id: i, start: -1, on: -1}
		e.jobs = append(e.jobs, j)
		e.push(&event{at: js.Arrival, kind: evArrival, job: j})
	}
	e.res.Jobs = len(e.jobs)
	if iv := p.Interval(); iv > 0 {
		e.push(&event{at: iv, kind: evTick})
	}
	e.push(&event{at: 0, kind: evSample})
	e.reconcile()
	for e.events.Len() > 0 {
		ev := heap.Pop(&e.events).(*event)
		if ev.at > o.Horizon {
			break
		}
		e.now = ev.at
		e.handle(ev)
	}
	e.now = o.Horizon
	e.finish()
	return e.res
}

func (e *engine) push(ev *event) {
	e.seq++
	ev.seq = e.seq
	heap.Push(&e.events, ev)
}

func (e *engine) handle(ev *event) {
	switch ev.kind {
	case evArrival:
		if e.liveCount() == 0 && e.idleStart < 0 {
			e.idleStart = e.now
		}
		e.waiting = append(e.waiting, ev.job)
		e.decide(Arrival)
		e.estimate(ev.job)
	case evReady:
		in := e.insts[ev.inst]
		if in == nil || in.gone {
			return
		}
		in.registered, in.idleSince = true, e.now
		e.booted(in)
		if m := in.member; m != nil && m.inst == in && m.state == scaling.PoolStarting {
			m.to(scaling.PoolRunning, e.now)
		}
	case evDone:
		j := ev.job
		if j.done || j.run != ev.run || j.on < 0 {
			return
		}
		in := e.insts[j.on]
		e.ran(j, e.now-j.started)
		e.detach(in, j)
		j.done = true
		e.res.Completed++
		if len(in.jobs) == 0 {
			e.decide(Idle)
		}
	case evWarn:
		in := e.insts[ev.inst]
		if in == nil || in.gone || in.warned {
			return
		}
		in.warned = true
		e.res.SpotInterruptions++
		e.spot.interrupted(e.now, in.typ, in.zone)
		// The agent requeues its work at the notice, without spending an
		// attempt, up to the preemption cap.
		for _, j := range slices.Clone(in.jobs) {
			e.detach(in, j)
			e.res.SpotRequeued++
			if j.preempted++; j.preempted > e.opt.PreemptionCap && !j.pinned {
				if r, ok := e.pol.(onDemandRung); !ok || !r.hasOnDemandRung() {
					j.dead = true
					e.res.Dead++
					continue
				}
				j.pinned = true
				e.res.PinnedToOnDemand++
			}
			e.requeue(j)
		}
		e.push(&event{at: e.now + spotWarning, kind: evReclaim, inst: in.id})
		e.reconcile() // capacity rebalance launches the replacement now
	case evReclaim:
		if in := e.insts[ev.inst]; in != nil && !in.gone {
			e.remove(in, false)
			if m := in.member; m != nil && m.inst == in {
				e.poolInterrupted(m)
			}
			e.reconcile()
		}
	case evSpotBack:
		e.reconcile() // the group's next launch attempt
	case evPoolStopped, evPoolBack:
		e.poolEvent(ev)
	case evTick:
		e.lastTick = e.now
		e.decide(Tick)
		e.push(&event{at: e.now + e.pol.Interval(), kind: evTick})
	case evSample:
		e.sample()
		if e.now+e.opt.Sample <= e.opt.Horizon {
			e.push(&event{at: e.now + e.opt.Sample, kind: evSample})
		}
		return
	}
	e.dispatch()
	if ev.kind == evTick {
		e.estimate(nil)
	}
}

// dispatch gives waiting jobs to free slots of registered workers, as their
// polls would, the longest-idle worker first.
func (e *engine) dispatch() {
	if len(e.waiting) == 0 {
		return
	}
	var free []*instance
	for _, id := range e.order {
		in := e.insts[id]
		if in.live() && !in.draining && in.registered && len(in.jobs) < e.opt.Slots {
			free = append(free, in)
		}
	}
	sort.SliceStable(free, func(a, b int) bool { return free[a].idleSince < free[b].idleSince })
	for _, in := range free {
		for len(in.jobs) < e.opt.Slots && len(e.waiting) > 0 {
			k := e.nextFor(in)
			if k < 0 {
				break
			}
			j := e.waiting[k]
			e.waiting = slices.Delete(e.waiting, k, k+1)
			e.start(in, j)
		}
	}
}

// runnable is the ready and leased work the tenants' caps let run
// (fairshare.Demand).
func (e *engine) runnable() int {
	idx := map[string]int{}
	var ts []fairshare.Tenant
	at := func(tenant string) *fairshare.Tenant {
		i, ok := idx[tenant]
		if !ok {
			i = len(ts)
			idx[tenant] = i
			ts = append(ts, fairshare.Tenant{ID: tenant, MaxLeased: e.opt.TenantMaxLeased})
		}
		return &ts[i]
	}
	for _, j := range e.waiting {
		at(j.spec.Tenant).Ready++
	}
	for _, id := range e.order {
		for _, j := range e.insts[id].jobs {
			at(j.spec.Tenant).Leased++
		}
	}
	return fairshare.Demand(ts)
}

// leasedByTenant is the census of the jobs running per tenant.
func (e *engine) leasedByTenant() map[string]int {
	leased := map[string]int{}
	for _, id := range e.order {
		for _, j := range e.insts[id].jobs {
			leased[j.spec.Tenant]++
		}
	}
	return leased
}

func (e *engine) start(in *instance, j *jobState) {
	if len(in.jobs) == 0 {
		in.busySince = e.now
	}
	in.jobs = append(in.jobs, j)
	if in.onDemand && e.spotShortSince < 0 && e.spotBackAt > 0 && e.now-e.spotBackAt > time.Minute {
		e.res.OnDemandStartsAfterSpot++
	}
	j.run++
	j.on, j.started = in.id, e.now
	e.leased(j)
	if j.start < 0 {
		if in.bridge {
			e.res.BridgedJobs++
		}
		if in.member != nil {
			e.res.PoolJobs++
		}
		j.start = e.now
		e.waits = append(e.waits, e.now-j.spec.Arrival)
		e.byTenant[j.spec.Tenant] = append(e.byTenant[j.spec.Tenant], e.now-j.spec.Arrival)
		if e.idleStart >= 0 {
			e.ttfl = append(e.ttfl, e.now-e.idleStart)
			e.idleStart = -1
		}
	}
	e.push(&event{at: e.now + j.spec.Duration, kind: evDone, job: j, inst: in.id, run: j.run})
}

func (e *engine) detach(in *instance, j *jobState) {
	in.jobs = slices.DeleteFunc(in.jobs, func(x *jobState) bool { return x == j })
	j.ran += e.now - j.started
	j.on = -1
	if len(in.jobs) == 0 {
		in.busyTotal += e.now - in.busySince
		in.idleSince = e.now
	}
}

// requeue puts interrupted work at the head of the queue: it has waited longest.
func (e *engine) requeue(j *jobState) {
	e.waiting = append([]*jobState{j}, e.waiting...)
}

func (e *engine) liveCount() int {
	n := 0
	for _, id := range e.order {
		in := e.insts[id]
		if in.live() {
			n++
		}
	}
	return n
}

// spotShort reports whether Spot capacity is missing now.
func (e *engine) spotShort() bool {
	for _, sp := range e.opt.SpotShortages {
		if e.now >= sp.From && e.now < sp.To {
			return true
		}
	}
	return false
}

func (e *engine) launch(onDemand bool) {
	e.nextInst++
	boot := e.between(e.opt.BootMin, e.opt.BootMax)
	in := &instance{id: e.nextInst, launched: e.now, readyAt: e.now + boot, onDemand: onDemand}
	if onDemand && e.poolSize > 0 {
		in.bridge = true
		if k := e.readyInPool(); k >= 0 {
			e.pool = slices.Delete(e.pool, k, k+1)
			in.readyAt = e.now + e.between(e.opt.BridgeStartMin, e.opt.BridgeStartMax)
			e.res.BridgeStarts++
		} else {
			in.fresh = true
			e.res.BridgeFreshLaunches++
		}
	}
	e.insts[in.id] = in
	e.order = append(e.order, in.id)
	e.res.Launches++
	if onDemand {
		e.res.OnDemandLaunches++
	}
	e.push(&event{at: in.readyAt, kind: evReady, inst: in.id})
	if !onDemand {
		in.typ, in.zone = e.spot.place()
		if life, ok := e.spotLife(in.typ, in.zone); ok {
			if at := e.now + life; at <= e.opt.Horizon {
				e.push(&event{at: at, kind: evWarn, inst: in.id})
			}
		}
	}
}

// remove terminates an instance; work still on it was killed by scale-in
// and goes back to the queue.
func (e *engine) remove(in *instance, scaleIn bool) {
	for _, j := range slices.Clone(in.jobs) {
		e.detach(in, j)
		e.requeue(j)
		if scaleIn {
			e.res.Killed++
			e.res.KillTimes = append(e.res.KillTimes, e.now)
		}
	}
	in.gone, in.ended = true, e.now
	e.order = slices.DeleteFunc(e.order, func(id int) bool { return id == in.id })
	if in.bridge && len(e.pool) < e.poolSize {
		// ReuseOnScaleIn: back into the pool, startable once stopped.
		e.pool = append(e.pool, e.now+e.opt.bridgeStop())
	}
}

// between draws a delay uniformly from lo to hi, to the second.
func (e *engine) between(lo, hi time.Duration) time.Duration {
	d := lo
	if span := hi - lo; span > 0 {
		d += time.Duration(e.rng.Int64N(int64(span)))
	}
	return d.Round(time.Second)
}

// readyInPool is the index of a pooled instance that is stopped and can be
// started now (the one ready longest), -1 if none.
func (e *engine) readyInPool() int {
	k := -1
	for i, at := range e.pool {
		if at <= e.now && (k < 0 || at < e.pool[k]) {
			k = i
		}
	}
	return k
}

// reconcile is the Auto Scaling Group: it launches or removes instances
// until the live ones match the desired capacity, removing the ones the
// policy's victim rule names.
func (e *engine) reconcile() {
	e.desired = min(max(e.desired, 0), e.opt.MaxInstances)
	e.odDesired = min(max(e.odDesired, 0), e.opt.MaxInstances)
	live, od := e.liveInstances(false), e.liveInstances(true)
	for n := len(live); n < e.desired; n++ {
		if e.spotShort() {
			// InsufficientInstanceCapacity: the group keeps its desired
			// capacity and tries again later.
			if e.spotShortSince < 0 {
				e.spotShortSince = e.now
			}
			e.res.SpotLaunchFailures++
			break
		}
		e.launch(false)
		if e.spotShortSince >= 0 {
			e.spotShortSince, e.spotBackAt = -1, e.now
		}
	}
	for n := len(od); n < e.odDesired; n++ {
		e.launch(true)
	}
	if extra := len(live) - e.desired; extra > 0 {
		for _, in := range e.pickVictims(live, extra) {
			e.remove(in, true)
		}
	}
	if extra := len(od) - e.odDesired; extra > 0 {
		for _, in := range e.pickVictims(od, extra) {
			e.remove(in, true)
		}
	}
	if n := e.liveCount(); n > e.res.PeakInstances {
		e.res.PeakInstances = n
	}
}

// liveInstances are the live instances of one group.
func (e *engine) liveInstances(onDemand bool) []*instance {
	var out []*instance
	for _, id := range e.order {
		if in := e.insts[id]; in.live() && in.onDemand == onDemand && in.member == nil {
			out = append(out, in)
		}
	}
	return out
}

func (e *engine) pickVictims(live []*instance, n int) []*instance {
	switch e.pol.Victims() {
	case VictimRandom:
		idx := e.rng.Perm(len(live))[:n]
		out := make([]*instance, n)
		for i, k := range idx {
			out[i] = live[k]
		}
		return out
	case VictimNewest:
		return slices.Clone(live[len(live)-n:])
	default:
		// A policy that names its victims never lowers desired below the
		// live count without them; if it does, the group takes idle
		// instances first.
		sorted := slices.Clone(live)
		sort.SliceStable(sorted, func(a, b int) bool { return len(sorted[a].jobs) < len(sorted[b].jobs) })
		return sorted[:n]
	}
}

func (e *engine) observe() Observation {
	o := Observation{Now: e.now, Queued: len(e.waiting), Desired: e.desired, Slots: e.opt.Slots,
		MinInstances: e.opt.MinInstances, MaxInstances: e.opt.MaxInstances,
		OnDemandDesired: e.odDesired, SpotShortSince: e.spotShortSince, FailedStart: e.failed}
	if len(e.members) > 0 {
		o.Pool = e.poolViews()
	}
	o.OldestQueued = -1
	for _, j := range e.waiting {
		if j.pinned {
			o.PinnedQueued++
		}
		if o.OldestQueued < 0 || j.spec.Arrival < o.OldestQueued {
			o.OldestQueued = j.spec.Arrival
		}
	}
	if e.opt.FairShare && e.opt.TenantMaxLeased > 0 {
		o.Capped, o.Runnable = true, e.runnable()
	}
	o.Instances = make([]InstanceView, 0, len(e.order))
	for _, id := range e.order {
		in := e.insts[id]
		o.Leased += len(in.jobs)
		for _, j := range in.jobs {
			if j.pinned {
				o.PinnedLeased++
			}
		}
		o.Instances = append(o.Instances, InstanceView{
			ID: in.id, LaunchedAt: in.launched, Registered: in.registered, Draining: in.warned || in.draining,
			Busy: len(in.jobs), IdleSince: in.idleSince, OnDemand: in.onDemand, Bridge: in.bridge,
		})
		if in.member != nil {
			o.Instances[len(o.Instances)-1].PoolID = in.member.id
		}
	}
	return o
}

func (e *engine) decide(t Trigger) Action {
	if t == Tick && e.weighs {
		occupied := map[string]int{}
		for _, id := range e.order {
			if in := e.insts[id]; !in.onDemand {
				occupied[in.zone]++
			}
		}
		e.spot.weigh(e.now, occupied)
	}
	a := e.pol.Decide(t, e.observe())
	for _, id := range a.Terminate {
		in := e.insts[id]
		if in == nil || in.gone {
			continue
		}
		if in.live() && in.onDemand {
			e.odDesired--
		} else if in.live() {
			e.desired--
		}
		e.remove(in, true)
	}
	for _, id := range a.Drain {
		if in := e.insts[id]; in != nil && !in.gone {
			in.draining = true
		}
	}
	if a.Desired >= 0 {
		e.desired = a.Desired
	}
	if a.SetOnDemand {
		e.odDesired = a.OnDemandDesired
	}
	e.reconcile()
	e.applyPool(a)
	return a
}

func (e *engine) sample() {
	s := Sample{At: e.now, Waiting: len(e.waiting)}
	for _, id := range e.order {
		in := e.insts[id]
		if in.registered && !in.warned {
			s.InService++
		}
		s.Running += len(in.jobs)
	}
	e.timeline = append(e.timeline, s)
}

func (e *engine) finish() {
	var billed, busy, odBilled, bridgeBilled, poolBilled time.Duration
	for _, in := range e.insts {
		end := e.now
		if in.gone {
			end = in.ended
		}
		billed += in.billed(end)
		if in.member != nil {
			poolBilled += in.billed(end)
		}
		if in.bridge {
			bridgeBilled += end - in.launched
		}
		if in.onDemand {
			odBilled += end - in.launched
			e.res.OnDemandEndS = max(e.res.OnDemandEndS, end.Seconds())
		}
		b := in.busyTotal
		if len(in.jobs) > 0 {
			b += end - in.busySince
		}
		busy += b
	}
	r := &e.res
	for _, j := range e.jobs {
		switch {
		case j.done, j.dead:
		case j.on >= 0:
			r.Running++
		default:
			r.Queued++
		}
	}
	r.GPUHours = billed.Hours()
	r.BusyGPUHours = busy.Hours()
	if billed > 0 {
		r.Utilization = busy.Hours() / billed.Hours()
	}
	r.OnDemandGPUHours = odBilled.Hours()
	r.BridgeGPUHours = bridgeBilled.Hours()
	r.CostUSD = (r.GPUHours-r.OnDemandGPUHours)*e.opt.PricePerHour + r.OnDemandGPUHours*e.opt.OnDemandPricePerHour
	if e.poolSize > 0 {
		// The pool's volumes, every hour of the workload's days (a bridge
		// running keeps its volume too; it is counted once, here).
		days := r.WorkloadEnd
		if days <= 0 {
			days = e.now
		}
		r.PoolStorageUSD = cost.Volumes(e.poolSize, e.opt.BridgeVolumeGB, e.opt.EBSPricePerGBMonth, days)
		r.CostUSD += r.PoolStorageUSD
	}
	if e.poolCfg.Enabled() {
		r.SpotPoolGPUHours = poolBilled.Hours()
		r.SpotPoolStorageUSD = e.poolStorage()
		r.CostUSD += r.SpotPoolStorageUSD
	}
	if len(e.waits) > 0 {
		r.MaxWaitS = slices.Max(e.waits).Seconds()
	}
	if r.Completed > 0 {
		r.CostPerJobUSD = r.CostUSD / float64(r.Completed)
	}
	r.CostByWorkflow = e.costByWorkflow()
	if len(e.byTenant) > 1 {
		r.P95WaitByTenantS = map[string]float64{}
		for t, ws := range e.byTenant {
			r.P95WaitByTenantS[t] = quantile(ws, 0.95).Seconds()
		}
	}
	r.P50WaitS = quantile(e.waits, 0.50).Seconds()
	r.P95WaitS = quantile(e.waits, 0.95).Seconds()
	if len(e.ttfl) > 0 {
		r.TTFLIdleMaxS = slices.Max(e.ttfl).Seconds()
		r.TTFLIdleP50S = quantile(e.ttfl, 0.5).Seconds()
	}
	r.ColdStarts = len(e.ttfl)
	r.Timeline = e.timeline
	r.Estimates = e.estimates()
}

// costByWorkflow shares the bill among the workflows by the time their jobs
// held a slot, so each job carries its leased time plus its share of the
// boot and idle time around it (a slot-second costs bill / busy slot-seconds).
func (e *engine) costByWorkflow() map[string]float64 {
	var slotTime time.Duration
	by := map[string]time.Duration{}
	for _, j := range e.jobs {
		ran := j.ran
		if j.on >= 0 {
			ran += e.now - j.started
		}
		by[j.spec.Workflow] += ran
		slotTime += ran
	}
	out := map[string]float64{}
	if slotTime <= 0 {
		return out
	}
	for wf, d := range by {
		out[wf] = e.res.CostUSD * d.Seconds() / slotTime.Seconds()
	}
	return out
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}
