package eta

import (
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fairshare"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Horizon is how far ahead a projection looks: a job not started by then
// gets no StartAt (BasisBeyondHorizon).
const Horizon = 24 * time.Hour

// MaxProjected is how many queued jobs a projection follows, the first in
// queue order; a job behind them gets no StartAt (BasisBeyondHorizon) and
// keeps its Position. A projection's cost grows with the jobs it follows
// and the ticks until the last of them starts (docs/benchmarks.md, "Start
// estimates"): behind 50 busy instances at their max, 250 jobs take some
// 10 MB and 30 ms, 500 some 18 MB and 60 ms; 250 keeps one projection
// within 20 MB and well within 50 ms on the API function, and the
// simulator's workloads estimate as well with it as without.
const MaxProjected = 250

// DefaultInterval is the scaler's tick when the snapshot names none.
const DefaultInterval = time.Minute

// Project projects the fleet forward from the snapshot taken at now and
// answers an estimate for each queued job, in lease order (Position 1
// first; jobs waiting out a backoff last, by when they are due).
//
// The projection steps from event to event: a running job's expected end
// (its lease start plus its workflow's run time, given how long it has run
// already), an instance's expected registration (its launch plus the
// fleet's boot time, given how long it has booted already), a backoff's
// end, and each scaler tick. At each tick it runs the scaler's policy
// (scaling.Decide, or scaling.DecideLadder for a fleet with Spot) on the
// projected state and launches what it answers, ready a boot later; at each
// moment the free slots lease the queue in the planner's order
// (lease.MakePlan, with fair share and the tenants' max_leased).
func Project(s Snapshot, now time.Time) []Estimate {
	var behind []Queued
	s.Queued, behind = cut(s.Queued, now)
	s.Beyond += len(behind)
	// Every projection follows the queue in the same order: sorted once,
	// each job found by its index.
	s.Queued = slices.Clone(s.Queued)
	slices.SortStableFunc(s.Queued, func(a, b Queued) int { return lease.QueueCompare(a.Candidate, b.Candidate) })
	q := queue{index: make(map[string]int, len(s.Queued))}
	for i, j := range s.Queued {
		q.index[j.JobID] = i
		if plain(j, now) {
			q.byCreated = append(q.byCreated, i)
		}
	}
	slices.SortStableFunc(q.byCreated, func(a, b int) int { return s.Queued[a].Created.Compare(s.Queued[b].Created) })
	s.Boot = s.Boot.sorted()
	runs := make(map[string]History, len(s.RunTimes))
	for wf, h := range s.RunTimes {
		runs[wf] = h.sorted()
	}
	s.RunTimes = runs
	ps := make([]*projection, Samples)
	for k := range ps {
		ps[k] = newProjection(s, now, sampler(k, now), q)
		ps[k].run()
	}
	order := ps[0].order()
	out := make([]Estimate, 0, len(order)+len(behind))
	type pick struct {
		p *projection
		j *pjob
	}
	picks := make([]pick, len(ps))
	for i, j := range order {
		// The sample whose start most others agree with answers for the
		// job; when it starts in no more than half, the median one (those
		// that never start sort last).
		picks = picks[:len(ps)]
		for k, p := range ps {
			picks[k] = pick{p, p.job(j.q.JobID)}
		}
		slices.SortStableFunc(picks, func(a, b pick) int {
			switch {
			case a.j.started && b.j.started:
				return a.j.start.Compare(b.j.start)
			case a.j.started:
				return -1
			case b.j.started:
				return 1
			}
			return 0
		})
		m := picks[len(picks)/2]
		if m.j.started {
			m = picks[densest(picks, func(k int) (time.Time, bool) { return picks[k].j.start, picks[k].j.started }, now, len(picks)/2)]
		}
		out = append(out, m.p.estimate(m.j, i+1))
	}
	for i, q := range behind {
		out = append(out, beyond(q, len(order)+i+1))
	}
	return out
}

// cut is the queue's first MaxProjected jobs in queue order (ready ones by
// the queue's order, then those waiting out a backoff by when they are due)
// and those behind them, in that order.
func cut(qs []Queued, now time.Time) (ahead, behind []Queued) {
	if len(qs) <= MaxProjected {
		return qs, nil
	}
	qs = slices.Clone(qs)
	slices.SortStableFunc(qs, func(a, b Queued) int {
		aLater, bLater := a.NotBefore.After(now), b.NotBefore.After(now)
		switch {
		case aLater && bLater:
			return a.NotBefore.Compare(b.NotBefore)
		case aLater:
			return 1
		case bLater:
			return -1
		}
		return lease.QueueCompare(a.Candidate, b.Candidate)
	})
	return qs[:MaxProjected], qs[MaxProjected:]
}

// Behind is the estimate of a queued job a snapshot left out (one with
// Beyond jobs), behind the ahead jobs it holds: no start
// (BasisBeyondHorizon), its place in line unknown.
func Behind(jobID string, ahead int) Estimate {
	return Estimate{JobID: jobID, Basis: BasisBeyondHorizon,
		WaitingOn: say(CodeJobsAhead, "at least "+count(ahead, "job")+" ahead; too far back in line to project")}
}

// beyond is the estimate of a job behind the jobs a projection follows, at
// position pos in queue order.
func beyond(q Queued, pos int) Estimate {
	return Estimate{JobID: q.JobID, Position: pos, Basis: BasisBeyondHorizon,
		WaitingOn: say(CodeJobsAhead, count(pos-1, "job")+" ahead; too far back in line to project",
			ParamAhead, strconv.Itoa(pos-1))}
}

// densest is the sample whose start has the most of the samples' starts
// within the goal's tolerance of it (max(60 s, 20% of its wait from now)),
// the one nearest mid (the median) among equals.
func densest[T any](xs []T, at func(k int) (time.Time, bool), now time.Time, mid int) int {
	best, most := mid, -1
	for i := range xs {
		ti, ok := at(i)
		if !ok {
			continue
		}
		tol := max(time.Minute, ti.Sub(now)/5)
		n := 0
		for k := range xs {
			if tk, ok := at(k); ok && tk.Sub(ti) <= tol && ti.Sub(tk) <= tol {
				n++
			}
		}
		if n > most || (n == most && abs(i-mid) < abs(best-mid)) {
			best, most = i, n
		}
	}
	return best
}

func abs(n int) int { return max(n, -n) }

// Samples is how many projections Project runs, each drawing the running
// jobs' remaining run times and the boots from the fleet's history; a
// job's estimate is the start most of its starts agree on. One projection from each
// duration's median would be late: the first of many running jobs to end
// ends sooner than the earliest of their medians.
const Samples = 15

// drawer answers how much longer something of a history of durations runs,
// given how long it has run (ok false: the history is empty).
type drawer func(h History, elapsed time.Duration) (time.Duration, bool)

// sampler is the k-th projection's drawer (History.Draw) at now, at random
// from a generator seeded by k and now alone: the same snapshot gives the
// same estimates, and no draw is the same at every moment.
func sampler(k int, now time.Time) drawer {
	rng := rand.New(rand.NewPCG(uint64(k), uint64(now.UnixNano())))
	return func(h History, elapsed time.Duration) (time.Duration, bool) {
		return h.Draw(elapsed, rng.IntN)
	}
}

type origin int

const (
	// fromWorker: an instance with a registered worker at the snapshot.
	fromWorker origin = iota
	// fromBooting: launched (or asked for) at the snapshot, not registered.
	fromBooting
	// fromTick: launched by a projected tick.
	fromTick
)

// slot is one slot of a projected instance.
type slot struct {
	// held: a job of tenant holds it until freeAt, when known; pinned: the
	// job is pinned to On-Demand.
	held, pinned bool
	tenant       string
	freeAt       time.Time
	known        bool
	// used: a job held it in the projection (or at the snapshot).
	used bool
}

// pinst is a projected instance.
type pinst struct {
	id     string
	origin origin
	// readyAt is when its worker may lease, when readyKnown.
	readyAt    time.Time
	readyKnown bool
	firstSeen  time.Time
	// tick and tickLaunch: the tick that launched it, and how many it did.
	tick       time.Time
	tickLaunch int
	workflows  []string
	onDemand   bool
	pending    bool
	draining   bool
	idleSince  time.Time
	lastSeen   time.Time
	slots      []slot
}

func (in *pinst) usable(t time.Time) bool {
	return in.readyKnown && !in.readyAt.After(t) && !in.pending && !in.draining
}

func (in *pinst) busy() int {
	n := 0
	for _, s := range in.slots {
		if s.held {
			n++
		}
	}
	return n
}

// queue is what every projection of a snapshot shares of its queue, in
// queue order: each job's index by id, and the plain jobs' indexes, oldest
// first.
type queue struct {
	index     map[string]int
	byCreated []int
}

// plain reports whether a queued job is ready at now and has no queue
// deadline: until it starts, it is leasable.
func plain(q Queued, now time.Time) bool {
	return !q.NotBefore.After(now) && q.QueueDeadline.IsZero()
}

// pjob is a projected queued job.
type pjob struct {
	q       Queued
	started bool
	start   time.Time
	on      *pinst
	// reused: the slot it took had held a job before (it frees as one ends).
	reused bool
	// atMax: the fleet was at its max when it started.
	atMax bool
	// expired: its queue deadline passed in the projection before it
	// started (the sweeper ends it).
	expired bool
	// plain: it is leasable until it starts (func plain).
	plain bool
}

type projection struct {
	s        Snapshot
	now      time.Time
	interval time.Duration
	left     drawer
	bootOK   bool
	insts    []*pinst
	jobs     []*pjob // in queue order
	// index is each job's place in jobs, by id; byCreated the plain
	// jobs', oldest first, those before oldest started.
	index     map[string]int
	byCreated []int
	oldest    int
	// ready counts the plain jobs not started, in all and pinned, and per
	// tenant (with tenants); others are the jobs not plain. work reads
	// them at each tick instead of the whole queue.
	ready    work
	others   []*pjob
	byTenant map[string]int
	// lines are the queue cut by tenant, workflow and pinning, each in
	// queue order: a poll's first choice is among their heads.
	lines []*line
	// times are the moments a backoff or a queue deadline runs out, sorted.
	times []time.Time
	// cands, instances and workers are reused from one poll or tick to
	// the next.
	cands     []lease.Candidate
	free      []*pinst
	instances []scaling.Instance
	workers   []scaling.Worker
	waiting   int // jobs not started
	leased    map[string]int
	// running counts the leased jobs (the snapshot's and the projection's).
	running                      int
	desired, spotDes, odDes      int
	lastActive, nextTick         time.Time
	workflows                    []string
	pinnedLeased                 int
	censusNow                    map[string]int
	bootingNow, pendingNow, held int
	launches                     int
}

// newProjection is a projection of the snapshot, whose Queued are in
// queue order (lease.QueueCompare) and found by index.
func newProjection(s Snapshot, now time.Time, left drawer, q queue) *projection {
	p := &projection{s: s, now: now, interval: s.Interval, left: left, leased: map[string]int{}, lastActive: s.LastActiveAt,
		nextTick: s.NextTick, index: q.index, byCreated: q.byCreated}
	if s.Tenants != nil {
		p.ready.byTenant, p.byTenant = map[string]int{}, map[string]int{}
	}
	if p.interval <= 0 {
		p.interval = DefaultInterval
	}
	if p.nextTick.Before(now) {
		p.nextTick = now
	}
	p.bootOK = len(s.Boot) > 0
	set := map[string]bool{}
	for _, q := range s.Queued {
		set[q.WorkflowID] = true
	}
	p.workflows = slices.Sorted(maps.Keys(set))

	if len(s.Instances) == 0 {
		// A fleet with no group: its workers were started by hand, and
		// each machine a worker registered from is an instance in service,
		// as the scaler counts it.
		seen := map[string]bool{}
		for _, w := range s.Workers {
			if w.InstanceID != "" && !seen[w.InstanceID] {
				seen[w.InstanceID] = true
				s.Instances = append(s.Instances, scaling.Instance{ID: w.InstanceID, LifecycleState: scaling.StateInService})
			}
		}
		s.Desired = len(s.Instances)
	}
	workers := map[string]Worker{}
	for _, w := range s.Workers {
		if w.InstanceID != "" {
			workers[w.InstanceID] = w
		}
	}
	byWorker := map[string][]Running{}
	for _, r := range s.Running {
		byWorker[r.WorkerID] = append(byWorker[r.WorkerID], r)
		p.leased[r.TenantID]++
		p.running++
		if r.OnDemandOnly {
			p.pinnedLeased++
		}
	}
	slots := max(1, s.Settings.Slots)
	var odCount, spotCount int
	for _, inst := range s.Instances {
		in := &pinst{id: inst.ID, firstSeen: inst.FirstSeen, slots: make([]slot, slots)}
		if in.firstSeen.IsZero() {
			in.firstSeen = now
		}
		if s.Spot != nil && s.Spot.OnDemand[inst.ID] {
			in.onDemand = true
			odCount++
		} else {
			spotCount++
		}
		if w, ok := workers[inst.ID]; ok {
			in.origin, in.readyAt, in.readyKnown = fromWorker, now, true
			in.workflows, in.pending, in.draining = w.Workflows, w.Pending, w.Draining
			in.idleSince, in.lastSeen = w.IdleSince, w.LastSeen
			if w.Pending {
				p.pendingNow++
			}
			for k, r := range byWorker[w.ID] {
				if k >= len(in.slots) {
					in.slots = append(in.slots, slot{})
				}
				in.slots[k] = p.holding(r.TenantID, r.WorkflowID, r.LeasedAt, now)
				in.slots[k].pinned = r.OnDemandOnly
			}
		} else {
			in.origin = fromBooting
			p.bootingNow++
			p.booting(in, now, now.Sub(in.firstSeen))
		}
		p.insts = append(p.insts, in)
	}
	// Launches asked for and not started yet are on the way.
	addPending := func(n int, onDemand bool) {
		for range n {
			p.launches++
			in := &pinst{id: "pending-" + strconv.Itoa(p.launches), origin: fromBooting, firstSeen: now, onDemand: onDemand, slots: make([]slot, slots)}
			p.booting(in, now, 0)
			p.bootingNow++
			p.insts = append(p.insts, in)
		}
	}
	if sp := s.Spot; sp != nil {
		p.spotDes, p.odDes = max(sp.SpotDesired, spotCount), max(sp.OnDemandDesired, odCount)
		addPending(p.odDes-odCount, true)
		if sp.ShortSince.IsZero() {
			addPending(p.spotDes-spotCount, false)
		}
	} else {
		addPending(s.Desired-len(s.Instances), false)
	}
	p.desired = max(s.Desired, len(p.insts))

	lines := map[lineKey]*line{}
	jobs := make([]pjob, len(s.Queued))
	p.jobs = make([]*pjob, len(s.Queued))
	for i, q := range s.Queued {
		j := &jobs[i]
		j.q, j.plain = q, plain(q, now)
		p.jobs[i] = j
		if j.plain {
			p.ready.add(j, 1)
		} else {
			p.others = append(p.others, j)
		}
		c := q.Candidate
		k := lineKey{c.TenantID, c.WorkflowID, c.OnDemandOnly}
		l := lines[k]
		if l == nil {
			l = &line{workflow: c.WorkflowID, pinned: c.OnDemandOnly}
			lines[k] = l
			p.lines = append(p.lines, l)
		}
		l.jobs = append(l.jobs, j)
		for _, u := range []time.Time{j.q.NotBefore, j.q.QueueDeadline} {
			if u.After(now) {
				p.times = append(p.times, u)
			}
		}
	}
	slices.SortFunc(p.times, time.Time.Compare)
	p.waiting = len(p.jobs)
	p.censusNow = maps.Clone(p.leased)
	return p
}

// job is the projected job of the id.
func (p *projection) job(id string) *pjob { return p.jobs[p.index[id]] }

// booting sets when an instance that has booted for elapsed at t is
// expected ready (unknown without a boot history).
func (p *projection) booting(in *pinst, t time.Time, elapsed time.Duration) {
	if left, ok := p.left(p.s.Boot, elapsed); ok {
		in.readyAt, in.readyKnown = t.Add(left), true
	}
}

// holding is a slot held by a job of the workflow leased at since.
func (p *projection) holding(tenant, workflow string, since, t time.Time) slot {
	sl := slot{held: true, tenant: tenant, used: true}
	h := p.s.RunTimes[workflow]
	if len(h) == 0 {
		h = p.s.RunTimes[""]
	}
	if left, ok := p.left(h, t.Sub(since)); ok {
		sl.freeAt, sl.known = t.Add(left), true
	} else {
		p.held++
	}
	return sl
}

func (p *projection) run() {
	end := p.now.Add(Horizon)
	t := p.now
	for p.waiting > 0 && !t.After(end) {
		p.release(t)
		ticked, changed := false, false
		if !t.Before(p.nextTick) {
			ticked, changed = true, p.tick(p.nextTick)
			p.nextTick = p.nextTick.Add(p.interval)
		}
		p.lease(t)
		next, other := p.next(t)
		if ticked && !other && !changed && !p.rungAhead(t) {
			return // nothing left that can change
		}
		t = next
	}
}

// release frees the slots whose jobs end by t.
func (p *projection) release(t time.Time) {
	for _, in := range p.insts {
		for k := range in.slots {
			sl := &in.slots[k]
			if sl.held && sl.known && !sl.freeAt.After(t) {
				p.leased[sl.tenant]--
				p.running--
				if sl.pinned {
					p.pinnedLeased--
				}
				sl.held, sl.pinned, sl.tenant = false, false, ""
				if in.busy() == 0 {
					in.idleSince = sl.freeAt
				}
			}
		}
	}
}

// next is the next moment anything changes after t; other reports whether
// something besides the scaler's tick is due.
func (p *projection) next(t time.Time) (time.Time, bool) {
	next, other := p.nextTick, false
	at := func(u time.Time) {
		if u.After(t) {
			other = true
			if u.Before(next) {
				next = u
			}
		}
	}
	for _, in := range p.insts {
		if in.readyKnown && !in.pending && !in.draining {
			at(in.readyAt)
		}
		for k := range in.slots {
			if sl := &in.slots[k]; sl.held && sl.known {
				at(sl.freeAt)
			}
		}
	}
	if i := sort.Search(len(p.times), func(i int) bool { return p.times[i].After(t) }); i < len(p.times) {
		at(p.times[i])
	}
	return next, other
}

// rungAhead reports whether the On-Demand rung may still come: Spot is
// short and the wait before it has not run out by t.
func (p *projection) rungAhead(t time.Time) bool {
	sp := p.s.Spot
	return sp != nil && !sp.ShortSince.IsZero() && sp.After > 0 && t.Before(sp.ShortSince.Add(sp.After))
}

// leasable reports whether the job may be leased at t: not started, not
// waiting out a backoff, not past its queue deadline (then it is ended).
func (p *projection) leasable(j *pjob, t time.Time) bool {
	if j.started || j.expired {
		return false
	}
	if lease.QueueExpired(j.q.Candidate, t) {
		j.expired = true
		p.waiting--
		return false
	}
	return !j.q.NotBefore.After(t)
}

type lineKey struct {
	tenant, workflow string
	pinned           bool
}

// line is the queued jobs of one tenant, workflow and pinning, in queue
// order; those before head have started or ended.
type line struct {
	jobs     []*pjob
	head     int
	workflow string
	pinned   bool
}

// first is the line's first job leasable at t (nil: none).
func (l *line) first(p *projection, t time.Time) *pjob {
	for l.head < len(l.jobs) && (l.jobs[l.head].started || l.jobs[l.head].expired) {
		l.head++
	}
	for _, j := range l.jobs[l.head:] {
		if p.leasable(j, t) {
			return j
		}
	}
	return nil
}

// lease gives the free slots of the usable instances to the queue, the
// longest idle instance first, each by the planner's rule.
func (p *projection) lease(t time.Time) {
	free := p.free[:0]
	defer func() { p.free = free }()
	for _, in := range p.insts {
		if in.usable(t) && in.busy() < len(in.slots) {
			free = append(free, in)
		}
	}
	slices.SortStableFunc(free, func(a, b *pinst) int { return a.idleSince.Compare(b.idleSince) })
	for _, in := range free {
		for k := range in.slots {
			if in.slots[k].held {
				continue
			}
			j := p.pick(in, t)
			if j == nil {
				break
			}
			p.start(j, in, k, t)
		}
	}
}

// pick is the job a poll of the instance's worker leases at t: the first
// of the plan whose tenant is below its max_leased.
func (p *projection) pick(in *pinst, t time.Time) *pjob {
	wfs := in.workflows
	if wfs == nil {
		wfs = p.workflows
	}
	// Each line's first job stands for the line: the plan tries a tenant's
	// later jobs only after its first, and passes over a tenant at its cap
	// altogether.
	cands := p.cands[:0]
	for _, l := range p.lines {
		if (l.pinned && !in.onDemand) || !slices.Contains(wfs, l.workflow) {
			continue
		}
		if j := l.first(p, t); j != nil {
			cands = append(cands, j.q.Candidate)
		}
	}
	p.cands = cands
	if len(cands) == 0 {
		return nil
	}
	lease.InQueueOrder(cands)
	// The plan's order (lease.MakePlan's, without building its attempts):
	// the candidates are leasable at t, so its Skip passes them all, and
	// an attempt's slot term is its tenant's max_leased.
	pi := p.inputs(cands, lease.Worker{Workflows: wfs, OnDemand: in.onDemand}, t)
	for _, c := range lease.Order(cands, pi.Worker, pi.Tenants, pi.Spread, nil) {
		if pi.Cap != nil {
			if n := pi.Cap(c.TenantID); n > 0 && p.leased[c.TenantID] >= n {
				continue
			}
		}
		return p.job(c.JobID)
	}
	return nil
}

// inputs are the planner's inputs for candidates at t: strict order (the
// spread shuffles nothing), fair share and caps when the stage has tenants.
func (p *projection) inputs(cands []lease.Candidate, w lease.Worker, t time.Time) lease.Inputs {
	in := lease.Inputs{Candidates: cands, Worker: w, Spread: 1, Now: t, LeaseFor: p.interval}
	if ts := p.s.Tenants; ts != nil {
		in.Tenants = lease.Tenants{FairShare: true, Leased: p.leased, Settings: ts}
		in.Cap = func(id string) int { return ts(id).MaxLeased }
	}
	return in
}

func (p *projection) start(j *pjob, in *pinst, k int, t time.Time) {
	sl := &in.slots[k]
	j.started, j.start, j.on, j.reused = true, t, in, sl.used
	j.atMax = p.s.Settings.Max > 0 && len(p.insts) >= p.s.Settings.Max
	*sl = p.holding(j.q.TenantID, j.q.WorkflowID, t, t)
	sl.pinned = j.q.OnDemandOnly
	p.leased[j.q.TenantID]++
	p.running++
	p.waiting--
	if j.plain {
		p.ready.add(j, -1)
	}
	if j.q.OnDemandOnly {
		p.pinnedLeased++
	}
}

// tick runs the scaler's policy on the projected state at t and applies
// its answer: victims gone, launches booting. It reports whether anything
// changed.
func (p *projection) tick(t time.Time) bool {
	w := p.work(t)
	in := scaling.Input{Now: t, Settings: p.s.Settings, Ready: w.ready - p.capHeld(w), Leased: p.running, Desired: p.desired, LastActiveAt: p.lastActive}
	pinnedReady, oldest := w.pinned, w.oldest
	var odSet map[string]bool
	if p.s.Spot != nil {
		odSet = map[string]bool{}
	}
	in.Instances, in.Workers = p.instances[:0], p.workers[:0]
	defer func() { p.instances, p.workers = in.Instances, in.Workers }()
	for _, inst := range p.insts {
		state := scaling.StatePending
		registered := inst.origin == fromWorker || (inst.readyKnown && !inst.readyAt.After(t))
		if registered {
			state = scaling.StateInService
		}
		in.Instances = append(in.Instances, scaling.Instance{ID: inst.id, LifecycleState: state, FirstSeen: inst.firstSeen})
		if registered {
			seen := t
			if inst.origin == fromWorker && inst.lastSeen.Before(p.now) && inst.busy() == 0 {
				seen = inst.lastSeen // an idle worker not heard from stays so
			}
			in.Workers = append(in.Workers, scaling.Worker{ID: inst.id, InstanceID: inst.id, Leases: inst.busy(),
				Draining: inst.draining, LastSeen: seen, IdleSince: inst.idleSince})
		}
		if inst.onDemand && odSet != nil {
			odSet[inst.id] = true
		}
	}
	var launchSpot, launchOD int
	var victims []scaling.Victim
	var drain []string
	if sp := p.s.Spot; sp != nil {
		lin := scaling.LadderInput{Input: in, OnDemand: odSet, SpotDesired: p.spotDes, OnDemandDesired: p.odDes,
			SpotShortSince: sp.ShortSince, After: sp.After, WaitSLO: sp.WaitSLO,
			OnDemandOnlyReady: pinnedReady, OnDemandOnlyLeased: p.pinnedLeased}
		if !oldest.IsZero() {
			lin.OldestReadyWait = t.Sub(oldest)
		}
		d := scaling.DecideLadder(lin)
		victims, drain, p.lastActive = d.Victims, d.Drain, d.LastActiveAt
		odCount, spotCount := p.count(true), p.count(false)
		launchOD = max(0, d.OnDemandDesired-max(p.odDes, odCount))
		if sp.ShortSince.IsZero() {
			launchSpot = max(0, d.SpotDesired-max(p.spotDes, spotCount))
		}
		p.spotDes, p.odDes = d.SpotDesired, d.OnDemandDesired
	} else {
		d := scaling.Decide(in)
		victims, p.lastActive = d.Victims, d.LastActiveAt
		launchSpot = d.Launch
		p.desired = d.Desired
	}
	changed := len(victims) > 0 || len(drain) > 0 || launchSpot+launchOD > 0
	for _, v := range victims {
		p.insts = slices.DeleteFunc(p.insts, func(in *pinst) bool { return in.id == v.InstanceID && in.busy() == 0 })
	}
	for _, id := range drain {
		for _, in := range p.insts {
			if in.id == id {
				in.draining = true
			}
		}
	}
	for i := range launchSpot + launchOD {
		p.launches++
		in := &pinst{id: "launch-" + strconv.Itoa(p.launches), origin: fromTick, firstSeen: t, tick: t,
			tickLaunch: launchSpot + launchOD, onDemand: i >= launchSpot, slots: make([]slot, max(1, p.s.Settings.Slots))}
		p.booting(in, t, 0)
		p.insts = append(p.insts, in)
	}
	if p.s.Spot != nil {
		p.desired = len(p.insts)
	}
	return changed
}

func (p *projection) count(onDemand bool) int {
	n := 0
	for _, in := range p.insts {
		if in.onDemand == onDemand {
			n++
		}
	}
	return n
}

// work is the leasable work at t as a tick counts it.
type work struct {
	ready, pinned int
	oldest        time.Time
	// byTenant counts the ready jobs per tenant (nil without tenants).
	byTenant map[string]int
}

// add counts n more of the job's kind.
func (w *work) add(j *pjob, n int) {
	w.ready += n
	if j.q.OnDemandOnly {
		w.pinned += n
	}
	if w.byTenant != nil {
		w.byTenant[j.q.TenantID] += n
	}
}

// work counts the jobs leasable at t: all of them, per tenant, pinned,
// and when the oldest was queued. The plain ones are counted as they
// start; the others are looked at.
func (p *projection) work(t time.Time) work {
	// The jobs behind those followed are ready work to the scaler.
	w := work{ready: p.s.Beyond + p.ready.ready, pinned: p.ready.pinned}
	if p.byTenant != nil {
		clear(p.byTenant)
		for id, n := range p.ready.byTenant {
			if n > 0 {
				p.byTenant[id] = n
			}
		}
		w.byTenant = p.byTenant
	}
	for p.oldest < len(p.byCreated) && p.jobs[p.byCreated[p.oldest]].started {
		p.oldest++
	}
	if p.oldest < len(p.byCreated) {
		w.oldest = p.jobs[p.byCreated[p.oldest]].q.Created
	}
	for _, j := range p.others {
		if !p.leasable(j, t) {
			continue
		}
		if w.oldest.IsZero() || j.q.Created.Before(w.oldest) {
			w.oldest = j.q.Created
		}
		w.add(j, 1)
	}
	return w
}

// capHeld is how many of the ready jobs the tenants' max_leased caps keep
// from running (the scaler does not size for them).
func (p *projection) capHeld(w work) int {
	ts := p.s.Tenants
	if ts == nil {
		return 0
	}
	var tenants []fairshare.Tenant
	n := 0
	for id, r := range w.byTenant {
		tenants = append(tenants, fairshare.Tenant{ID: id, MaxLeased: ts(id).MaxLeased, Ready: r, Leased: p.leased[id]})
		n += r + p.leased[id]
	}
	return min(max(n-fairshare.Demand(tenants), 0), w.ready)
}
