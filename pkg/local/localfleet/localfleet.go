package localfleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// Machine is the worker running on a booted instance.
type Machine interface {
	// Stop ends it at once, as an instance's termination does: no goodbye.
	Stop()
	// Running is how many jobs it is running now.
	Running() int
}

// Noticed is a Machine that can be told of a Spot interruption notice the
// way the instance metadata service tells the agent on EC2.
type Noticed interface {
	SpotNotice()
}

// Launch starts the worker of an instance once it has booted.
type Launch func(ctx context.Context, fleet, instanceID string) Machine

// Interrupt delivers a Spot interruption warning for an instance, the way
// EventBridge would deliver it to the interruption function.
type Interrupt func(ctx context.Context, fleet, instanceID string) error

// Options configure a local fleet.
type Options struct {
	Clock clock.Clock
	// BootDelay is how long an instance takes from launch to running its worker.
	BootDelay time.Duration
	Launch    Launch
	// SpotRate is interruptions per instance-hour (0: none); Interrupt
	// delivers each warning, and the instance is reclaimed Notice later.
	SpotRate  float64
	Interrupt Interrupt
	Notice    time.Duration
	Seed      uint64
	// MaxInstances caps each fleet's group (its max size).
	MaxInstances map[string]int
	// OnDemand lists the fleets that have an On-Demand group beside their
	// Spot group (the fallback ladder, ladder.go).
	OnDemand map[string]bool
	// Pool gives a fleet's On-Demand group a warm pool of that many stopped
	// instances (its bridge, pool.go); the fleet gets the group even
	// without an On-Demand rung.
	Pool map[string]int
	// PoolStart is the fraction of BootDelay a pooled instance takes to
	// start (default 0.25).
	PoolStart float64
}

type instance struct {
	id         string
	launchedAt time.Time
	// boot is how long it takes from launch to running its worker: the
	// boot delay, or a pooled instance's start.
	boot      time.Duration
	fromPool  bool // started from the group's warm pool
	inService bool
	machine   Machine
	// reclaimAt is when a warned instance disappears (zero: not warned).
	reclaimAt time.Time
}

type group struct {
	fleet     string
	onDemand  bool
	desired   int
	instances map[string]*instance
	// short is set while the Spot group's launches fail for lack of
	// capacity (SetSpotShort); shortSince is when its first launch failed.
	short      bool
	shortSince time.Time
	// pool holds the stopped instances of an On-Demand group's warm pool,
	// oldest stopped first (pool.go).
	pool []string
}

// Fleet is the local fleets of a dev stack.
type Fleet struct {
	o      Options
	mu     sync.Mutex
	groups map[string]*group
	seq    int
	rng    *rand.Rand
	ctx    context.Context

	launched, terminated, interrupted, killedBusy int
	pooled, stopped, stoppedBusy                  int
	peak                                          map[string]int

	// spot holds the fleets' Spot pool instances by id, spotShort the
	// pairs without Spot capacity (spotpool.go).
	spot                                              map[string]*spotInstance
	spotShort                                         map[scaling.Pair]bool
	spotCreated, spotStarted, spotStopped, spotFailed int
	spotRefused                                       int
}

// New returns an empty local fleet; ctx bounds the workers it launches.
func New(ctx context.Context, o Options) *Fleet {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Notice <= 0 {
		o.Notice = 2 * time.Minute
	}
	return &Fleet{o: o, groups: map[string]*group{}, rng: rand.New(rand.NewPCG(o.Seed, 0x10ca1)), ctx: ctx, peak: map[string]int{}}
}

func (f *Fleet) group(fleet string) *group {
	g, ok := f.groups[fleet]
	if !ok {
		g = &group{fleet: fleet, instances: map[string]*instance{}}
		f.groups[fleet] = g
	}
	return g
}

// Describe reports a fleet's group (after bringing it up to date).
func (f *Fleet) Describe(_ context.Context, fleet string) (scaler.Group, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.describe(f.group(fleet)), nil
}

// describe reports a group. The caller holds f.mu.
func (f *Fleet) describe(g *group) scaler.Group {
	f.reconcile(g)
	out := scaler.Group{Desired: g.desired}
	for _, in := range g.instances {
		state := scaling.StatePending
		if in.inService {
			state = scaling.StateInService
		}
		out.Instances = append(out.Instances, scaling.Instance{ID: in.id, LifecycleState: state})
	}
	sort.Slice(out.Instances, func(i, j int) bool { return out.Instances[i].ID < out.Instances[j].ID })
	return out
}

// GroupName is the name of a fleet's local group: its Spot group, or its
// On-Demand group.
func GroupName(fleet string, onDemand bool) string {
	if onDemand {
		return "local-" + fleet + "-on-demand"
	}
	return "local-" + fleet
}

// InstanceGroup answers the group an instance is in and its lifecycle
// state (InService, or Pending while it boots), as Auto Scaling's
// DescribeAutoScalingInstances does; "" when no group has it. Attested
// registration on the dev stack checks instances with it.
func (f *Fleet) InstanceGroup(_ context.Context, instanceID string) (group, state string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.groups {
		if in, ok := g.instances[instanceID]; ok {
			state = scaling.StatePending
			if in.inService {
				state = scaling.StateInService
			}
			return GroupName(g.fleet, g.onDemand), state, nil
		}
	}
	return "", "", nil
}

// SetDesired sets a fleet's desired capacity; instances are launched at
// once (and removed only by Terminate: the group never picks a victim).
func (f *Fleet) SetDesired(_ context.Context, fleet string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.setDesired(f.group(fleet), n)
}

// setDesired sets a group's desired capacity. The caller holds f.mu.
func (f *Fleet) setDesired(g *group, n int) error {
	fleet := g.fleet
	if max, ok := f.o.MaxInstances[fleet]; ok && n > max {
		return fmt.Errorf("desired %d is above the group's max %d", n, max)
	}
	if n < 0 {
		return fmt.Errorf("desired %d is negative", n)
	}
	g.desired = n
	f.reconcile(g)
	return nil
}

// Terminate ends an instance and lowers the desired capacity by one.
func (f *Fleet) Terminate(_ context.Context, fleet, instanceID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.group(fleet)
	in, ok := g.instances[instanceID]
	if od, err := f.onDemandGroup(fleet); !ok && err == nil {
		g = od
		in, ok = g.instances[instanceID]
	}
	if !ok {
		return nil // already gone
	}
	if in.machine != nil && in.machine.Running() > 0 {
		f.killedBusy++
	}
	f.remove(g, in)
	g.desired = max(0, g.desired-1)
	f.terminated++
	return nil
}

// CompleteLifecycle lets a terminate lifecycle action go on, as an Auto
// Scaling group does when its hook is completed with CONTINUE: the instance
// ends, and the group replaces it if its desired capacity still counts it.
// An instance no group has is already gone.
func (f *Fleet) CompleteLifecycle(_ context.Context, _, _, instanceID, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.groups {
		if in, ok := g.instances[instanceID]; ok {
			f.remove(g, in)
			f.terminated++
			return nil
		}
	}
	return nil
}

func (f *Fleet) remove(g *group, in *instance) {
	if in.machine != nil {
		in.machine.Stop()
	}
	delete(g.instances, in.id)
}

// Step advances every group: boots finish, warned instances are reclaimed
// (and replaced, as a group keeps its desired capacity), and Spot
// interruptions strike at random. The dev stack calls it every second;
// tests call it as their clock moves.
func (f *Fleet) Step(ctx context.Context, elapsed time.Duration) {
	type warning struct{ fleet, id string }
	var warn []warning
	f.mu.Lock()
	now := f.o.Clock.Now()
	for _, slug := range f.slugs() {
		g := f.groups[slug]
		for _, in := range g.instances {
			if !in.reclaimAt.IsZero() && !now.Before(in.reclaimAt) {
				f.remove(g, in)
				continue
			}
			if f.o.SpotRate > 0 && !g.onDemand && in.inService && in.reclaimAt.IsZero() && f.rng.Float64() < f.o.SpotRate*elapsed.Hours() {
				in.reclaimAt = now.Add(f.o.Notice)
				f.interrupted++
				if n, ok := in.machine.(Noticed); ok {
					n.SpotNotice()
				}
				warn = append(warn, warning{slug, in.id})
			}
		}
		f.reconcile(g)
	}
	f.reconcileSpot()
	f.mu.Unlock()
	for _, w := range warn {
		if f.o.Interrupt != nil {
			_ = f.o.Interrupt(ctx, w.fleet, w.id)
		}
	}
}

// Run steps the fleet every interval until ctx ends.
func (f *Fleet) Run(ctx context.Context, interval time.Duration) {
	clock.Every(ctx, f.o.Clock, interval, func() { f.Step(ctx, interval) })
}

// reconcile launches instances up to the desired capacity and starts the
// workers of instances whose boot is over. A Spot group short of capacity
// launches nothing and remembers since when. The caller holds f.mu.
func (f *Fleet) reconcile(g *group) {
	now := f.o.Clock.Now()
	if g.short && len(g.instances) < g.desired {
		if g.shortSince.IsZero() {
			g.shortSince = now
		}
	} else {
		g.shortSince = time.Time{}
		for len(g.instances) < g.desired {
			if len(g.pool) > 0 {
				// The group draws on its warm pool first.
				id := g.pool[0]
				g.pool = g.pool[1:]
				g.instances[id] = &instance{id: id, launchedAt: now, boot: f.poolStart(), fromPool: true}
				f.pooled++
				continue
			}
			f.seq++
			id := fmt.Sprintf("i-local-%s-%04d", g.fleet, f.seq)
			if g.onDemand {
				id = fmt.Sprintf("i-local-%s-od-%04d", g.fleet, f.seq)
			}
			g.instances[id] = &instance{id: id, launchedAt: now, boot: f.o.BootDelay}
			f.launched++
		}
	}
	for _, in := range g.instances {
		if !in.inService && now.Sub(in.launchedAt) >= in.boot {
			in.inService = true
			if f.o.Launch != nil {
				ctx := context.WithValue(f.ctx, purchaseKey{}, purchaseOf(g))
				ctx = context.WithValue(ctx, launchedKey{}, in.launchedAt)
				ctx = context.WithValue(ctx, fromPoolKey{}, in.fromPool)
				in.machine = f.o.Launch(ctx, g.fleet, in.id)
			}
		}
	}
	key := g.fleet
	if g.onDemand {
		key = onDemandKey(g.fleet)
	}
	f.peak[key] = max(f.peak[key], len(g.instances))
}

func (f *Fleet) slugs() []string {
	out := make([]string, 0, len(f.groups))
	for s := range f.groups {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Stats are a local fleet's counters since it started.
type Stats struct {
	Launched, Terminated, Interrupted int
	// KilledBusy counts instances terminated (by the scaler) while their
	// worker was running a job: fleetq's scale-in must keep it at zero.
	KilledBusy int
	// Started counts instances started from a warm pool, Stopped those
	// stopped back into one, and StoppedBusy those stopped while their
	// worker was running a job (the bridge must keep it at zero).
	Started, Stopped, StoppedBusy int
	// PoolCreated, PoolStarted and PoolStopped count the Spot pool's
	// instances launched, started and stopped back into it (the stop that
	// ends a preparation not counted), PoolFailed its starts refused for
	// want of Spot capacity and PoolRefused those refused on an instance
	// EC2 stopped on an interruption. A Spot pool instance stopped busy
	// counts in StoppedBusy.
	PoolCreated, PoolStarted, PoolStopped, PoolFailed, PoolRefused int
	// Peak is the most instances each fleet had at once.
	Peak map[string]int
}

// Stats returns the fleet's counters.
func (f *Fleet) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	peak := make(map[string]int, len(f.peak))
	for k, v := range f.peak {
		peak[k] = v
	}
	return Stats{Launched: f.launched, Terminated: f.terminated, Interrupted: f.interrupted, KilledBusy: f.killedBusy,
		Started: f.pooled, Stopped: f.stopped, StoppedBusy: f.stoppedBusy, Peak: peak,
		PoolCreated: f.spotCreated, PoolStarted: f.spotStarted, PoolStopped: f.spotStopped, PoolFailed: f.spotFailed, PoolRefused: f.spotRefused}
}

// Close stops every worker.
func (f *Fleet) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range f.groups {
		for _, in := range g.instances {
			f.remove(g, in)
		}
	}
	for _, in := range f.spot {
		if in.machine != nil {
			in.machine.Stop()
			in.machine = nil
		}
	}
}

// PurchaseOption answers how the instance a Launch starts was bought:
// "on-demand" for an On-Demand group's instance, else "spot". The agent of
// a local instance reports it at registration, as the instance metadata
// tells it on EC2.
func PurchaseOption(ctx context.Context) string {
	if p, ok := ctx.Value(purchaseKey{}).(string); ok {
		return p
	}
	return cost.Spot
}

type purchaseKey struct{}

// LaunchedAt answers when the instance a Launch starts was launched or
// started from its pool (zero when unknown), as the instance identity
// document's pendingTime tells the agent on EC2.
func LaunchedAt(ctx context.Context) time.Time {
	t, _ := ctx.Value(launchedKey{}).(time.Time)
	return t
}

type launchedKey struct{}

// FromPool answers whether the instance a Launch starts was started from
// its group's warm pool (LaunchedAt is then that start), as the agent on
// EC2 knows from having waited while Auto Scaling prepared the instance.
func FromPool(ctx context.Context) bool {
	p, _ := ctx.Value(fromPoolKey{}).(bool)
	return p
}

type fromPoolKey struct{}

func purchaseOf(g *group) string {
	if g.onDemand {
		return cost.OnDemand
	}
	return cost.Spot
}
