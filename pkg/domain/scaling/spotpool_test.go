package scaling

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var (
	pairA = Pair{"g5.xlarge", "us-east-1a"}
	pairB = Pair{"g5.xlarge", "us-east-1b"}
	pairC = Pair{"g6.xlarge", "us-east-1a"}
)

// pool builds a Spot pool input: 2 slots a worker, a pool of size over
// pairs A, B, C.
type pool struct {
	inst    []PoolInstance
	workers []Worker
}

func (p *pool) add(pair Pair, state PoolState, since time.Duration) *pool {
	id := fmt.Sprintf("p-%d", len(p.inst))
	p.inst = append(p.inst, PoolInstance{ID: id, Pair: pair, State: state, Since: t0.Add(-since), Created: t0.Add(-24 * time.Hour)})
	return p
}

// worker adds a running pool instance on pair with a registered worker.
func (p *pool) worker(pair Pair, leases int, idleFor time.Duration) *pool {
	p.add(pair, PoolRunning, time.Hour)
	id := p.inst[len(p.inst)-1].ID
	p.workers = append(p.workers, Worker{ID: "w-" + id, InstanceID: id, Leases: leases, LastSeen: t0, IdleSince: t0.Add(-idleFor)})
	return p
}

func (p *pool) input(size, ready, free int) PoolInput {
	s := settings()
	s.SpotPool = SpotPoolSettings{Size: size, Pairs: []Pair{pairA, pairB, pairC}, VolumeGB: 60, MaxAge: 168 * time.Hour, Avoid: 15 * time.Minute}
	return PoolInput{Now: t0, Settings: s, Ready: ready, Free: free, Pool: p.inst, Workers: p.workers, Avoided: Avoided{}}
}

func (p *pool) stopped(n int, pairs ...Pair) *pool {
	for i := range n {
		p.add(pairs[i%len(pairs)], PoolStopped, time.Duration(n-i)*time.Minute)
	}
	return p
}

func countLive(ps []PoolInstance) int {
	n := 0
	for _, p := range ps {
		if p.State == PoolStarting || p.State == PoolRunning {
			n++
		}
	}
	return n
}

func orders(os []PoolOrder) string {
	var s []string
	for _, o := range os {
		switch {
		case o.ID == "":
			s = append(s, o.Pair.String())
		case o.For > 0:
			s = append(s, fmt.Sprintf("%s@%s×%d", o.ID, o.Pair, o.For))
		default:
			s = append(s, o.ID)
		}
	}
	return strings.Join(s, ",")
}

func TestPoolStart(t *testing.T) {
	t.Parallel()
	avoidA := func(in PoolInput) PoolInput { in.Avoided[pairA] = t0.Add(5 * time.Minute); return in }
	cases := []struct {
		name   string
		in     PoolInput
		starts string
		cover  int
		reason string
	}{
		{name: "cold fleet: one start per worker's slots, spread over the pairs",
			in:     (&pool{}).stopped(6, pairA, pairB, pairC).input(6, 5, 0),
			starts: "p-0@g5.xlarge/us-east-1a×2,p-1@g5.xlarge/us-east-1b×2,p-2@g6.xlarge/us-east-1a×1", cover: 5,
			reason: "pool: start 3"},
		{name: "free slots outside the pool take the work: nothing starts",
			in: (&pool{}).stopped(3, pairA, pairB, pairC).input(3, 2, 2), starts: "", cover: 0, reason: "pool: hold"},
		{name: "a pool instance already starting takes its slots: no second start for the same jobs",
			in: (&pool{}).add(pairA, PoolStarting, 10*time.Second).stopped(3, pairA, pairB, pairC).input(4, 3, 0),
			// A has one starting: B first, then C.
			starts: "p-2@g5.xlarge/us-east-1b×1", cover: 3},
		{name: "an avoided pair is skipped",
			in: avoidA((&pool{}).stopped(3, pairA, pairA, pairB).input(3, 4, 0)), starts: "p-2@g5.xlarge/us-east-1b×2", cover: 2,
			reason: "1 more wanted, no stopped instance on a pair not avoided (avoided: g5.xlarge/us-east-1a until 12:05:00)"},
		{name: "an interrupted instance is never started",
			in: (&pool{}).add(pairA, PoolInterrupted, time.Minute).add(pairB, PoolInterrupted, time.Minute).input(2, 2, 0), starts: "", cover: 0,
			reason: "2 interrupted (EC2 starts them again)"},
		{name: "a pool larger than the work starts what it needs",
			in: (&pool{}).stopped(10, pairA, pairB, pairC).input(10, 1, 0), starts: "p-0@g5.xlarge/us-east-1a×1", cover: 1},
		{name: "starts keep the fleet within its max",
			in: func() PoolInput {
				in := (&pool{}).add(pairA, PoolStarting, 10*time.Second).stopped(4, pairA, pairB, pairC).input(5, 9, 0)
				in.Others = 7 // 7 + 1 starting + 2 started = the max of 10
				return in
			}(),
			starts: "p-2@g5.xlarge/us-east-1b×2,p-3@g6.xlarge/us-east-1a×2", cover: 6, reason: "2 more wanted, the fleet at its max 10"},
		{name: "an idle running pool instance takes the work on enqueue",
			in: (&pool{}).worker(pairA, 0, 10*time.Minute).stopped(2, pairB).input(3, 2, 0), starts: "", cover: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := PoolStart(c.in)
			if live := countLive(c.in.Pool) + len(d.Starts); d.Live != live {
				t.Errorf("live %d, want the %d starting or running", d.Live, live)
			}
			if got := orders(d.Starts); got != c.starts || d.Covered != c.cover {
				t.Errorf("starts %q covering %d, want %q covering %d; %s", got, d.Covered, c.starts, c.cover, d.Reason)
			}
			if len(d.Stops)+len(d.Ends)+len(d.Creates) > 0 {
				t.Errorf("a wake only starts: %s", d.Reason)
			}
			if !strings.Contains(d.Reason.String(), c.reason) {
				t.Errorf("reason %q, want %q in it", d.Reason, c.reason)
			}
			for _, s := range d.Starts {
				if s.Reason.Code() != ReasonPoolStart || !strings.HasPrefix(s.Reason.String(), "pool start "+s.ID+" ("+s.Pair.String()+") for ") {
					t.Errorf("start %s: reason %q code %q", s.ID, s.Reason, s.Reason.Code())
				}
			}
		})
	}
}

func TestDecidePool(t *testing.T) {
	t.Parallel()
	aged := func(in PoolInput, i int, age time.Duration) PoolInput { in.Pool[i].Created = t0.Add(-age); return in }
	cases := []struct {
		name                         string
		in                           PoolInput
		starts, stops, ends, creates string
		cover, leased                int
		reason                       string
	}{
		{name: "idle, no work: stopped back into the pool at once",
			in:    (&pool{}).worker(pairA, 0, 10*time.Second).stopped(2, pairB, pairC).input(3, 0, 0),
			stops: "p-0", reason: "pool: stop 1"},
		{name: "idle for less than the fleet's idle time: kept",
			in: func() PoolInput {
				in := (&pool{}).worker(pairA, 0, time.Minute).stopped(2, pairB, pairC).input(3, 0, 0)
				in.Settings.SpotPool.Idle = 2 * time.Minute
				return in
			}(), reason: "pool: hold"},
		{name: "a busy one is never stopped, its free slot covers a ready job",
			in: (&pool{}).worker(pairA, 1, 0).stopped(2, pairB, pairC).input(3, 1, 0), cover: 1, leased: 1},
		{name: "idle but a ready job needs it: kept, no start",
			in: (&pool{}).worker(pairA, 0, 5*time.Minute).stopped(2, pairB, pairC).input(3, 2, 0), cover: 2},
		{name: "idle, ready work taken by free slots elsewhere: stopped",
			in: (&pool{}).worker(pairA, 0, 5*time.Minute).stopped(2, pairB, pairC).input(3, 2, 2), stops: "p-0"},
		{name: "two idle, work for one: the longest idle stops",
			in:    (&pool{}).worker(pairA, 0, 9*time.Minute).worker(pairB, 0, 3*time.Minute).stopped(1, pairC).input(3, 1, 0),
			stops: "p-0", cover: 1},
		{name: "a stopped instance past its age is ended and replaced on the least-filled pair",
			in:   aged((&pool{}).stopped(3, pairA, pairB, pairC).input(3, 0, 0), 1, 200*time.Hour),
			ends: "p-1", creates: "g5.xlarge/us-east-1b", reason: "pool: end 1, create 1"},
		{name: "refill to size over the least-filled pairs, none on an avoided one",
			in: func() PoolInput {
				in := (&pool{}).stopped(2, pairA, pairA).input(5, 0, 0)
				in.Avoided[pairB] = t0.Add(time.Minute)
				return in
			}(), creates: "g6.xlarge/us-east-1a,g6.xlarge/us-east-1a,g5.xlarge/us-east-1a"},
		{name: "interrupted ones count in the size but are not started",
			in:     (&pool{}).add(pairA, PoolInterrupted, time.Minute).stopped(1, pairB).input(2, 4, 0),
			starts: "p-1@g5.xlarge/us-east-1b×2", cover: 2, reason: "1 more wanted"},
		{name: "a started instance that never registers is ended",
			in:   (&pool{}).add(pairA, PoolStarting, 11*time.Minute).stopped(1, pairB).input(2, 0, 0),
			ends: "p-0", creates: "g5.xlarge/us-east-1a", reason: "pool: end 1, create 1"},
		{name: "a draining one holding a lease is left alone",
			in: func() PoolInput {
				in := (&pool{}).worker(pairA, 1, 0).input(1, 0, 0)
				in.Workers[0].Draining = true
				return in
			}(), leased: 1},
		{name: "no pool: nothing",
			in: func() PoolInput { in := (&pool{}).input(0, 3, 0); in.Settings.SpotPool = SpotPoolSettings{}; return in }(), reason: "pool: hold"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := DecidePool(c.in)
			got := []string{orders(d.Starts), orders(d.Stops), orders(d.Ends), orders(d.Creates)}
			want := []string{c.starts, c.stops, c.ends, c.creates}
			if strings.Join(got, "|") != strings.Join(want, "|") || d.Covered != c.cover || d.Leased != c.leased {
				t.Errorf("starts|stops|ends|creates %q covered %d leased %d, want %q %d %d; %s", got, d.Covered, d.Leased, want, c.cover, c.leased, d.Reason)
			}
			if !strings.Contains(d.Reason.String(), c.reason) {
				t.Errorf("reason %q, want %q in it", d.Reason, c.reason)
			}
			for _, k := range []struct {
				os   []PoolOrder
				code ReasonCode
			}{{d.Starts, ReasonPoolStart}, {d.Stops, ReasonPoolStop}, {d.Ends, ReasonPoolEnd}, {d.Creates, ReasonPoolRefill}} {
				for _, o := range k.os {
					if o.Reason.Code() != k.code || o.Reason.String() == "" {
						t.Errorf("%s: reason %q code %q, want code %q", o.ID, o.Reason, o.Reason.Code(), k.code)
					}
				}
			}
		})
	}
}

// A failed start avoids its pair for the fleet's avoid time; the next
// start skips the pair. A failed start's jobs go to a stopped instance on another pair that is
// not avoided and that no other start takes (one more start); only when
// none is left do they go to On-Demand. An interrupted instance is never
// that start.
func TestPoolStartFailed(t *testing.T) {
	t.Parallel()
	in := (&pool{}).stopped(4, pairA, pairB).add(pairC, PoolInterrupted, time.Hour).input(5, 4, 0)
	d := PoolStart(in)
	if len(d.Starts) != 2 || d.Starts[0].Pair != pairA || d.Starts[0].For != 2 || d.Starts[1].ID != "p-1" {
		t.Fatalf("starts %q", orders(d.Starts))
	}
	claimed := map[string]bool{"p-0": true, "p-1": true}
	f := PoolStartFailed(in, d.Starts[0], claimed)
	if f.Pair != pairA || f.Jobs != 0 || !f.Until.Equal(t0.Add(15*time.Minute)) || f.Reason.Code() != ReasonPoolFallback {
		t.Fatalf("failure %+v", f)
	}
	if want := "pool start p-0 failed on g5.xlarge/us-east-1a (no Spot capacity): g5.xlarge/us-east-1a avoided for 15m; its 2 jobs to p-3 (g5.xlarge/us-east-1b)"; f.Reason.String() != want {
		t.Fatalf("reason %q, want %q", f.Reason, want)
	}
	r := f.Retry
	if r == nil || r.ID != "p-3" || r.Pair != pairB || r.For != 2 || r.Reason.Code() != ReasonPoolStart {
		t.Fatalf("retry %+v, want p-3 on %s for the 2 jobs (p-1 is taken, p-2 is on the failed pair, p-4 interrupted)", r, pairB)
	}
	if want := "pool start p-3 (g5.xlarge/us-east-1b) for the 2 jobs of p-0's failed start"; r.Reason.String() != want {
		t.Fatalf("retry's reason %q, want %q", r.Reason, want)
	}
	in.Avoided.Avoid(f)
	claimed[r.ID] = true
	// The retry fails too: pair A is avoided, B failed, C holds only an
	// interrupted instance: On-Demand takes exactly those 2 jobs.
	f2 := PoolStartFailed(in, *r, claimed)
	if f2.Retry != nil || f2.Jobs != 2 || f2.Pair != pairB {
		t.Fatalf("second failure %+v, want its 2 jobs to On-Demand", f2)
	}
	if want := "pool start p-3 failed on g5.xlarge/us-east-1b (no Spot capacity): g5.xlarge/us-east-1b avoided for 15m; 2 jobs to On-Demand"; f2.Reason.String() != want {
		t.Fatalf("reason %q, want %q", f2.Reason, want)
	}
	in.Avoided.Avoid(f2)
	// The failed jobs are On-Demand's now (its start counts as free slots);
	// the other start is on its way (starting).
	in.Pool[1].State, in.Free = PoolStarting, 2
	again := PoolStart(in)
	if len(again.Starts) != 0 {
		t.Fatalf("after the failures, started %q again for jobs already covered", orders(again.Starts))
	}
	in.Ready = 7
	again = PoolStart(in)
	for _, s := range again.Starts {
		if s.Pair == pairA || s.Pair == pairB {
			t.Fatalf("started %s on an avoided pair", s.ID)
		}
	}
	if in.Avoided.Avoids(pairA, t0.Add(15*time.Minute)) || !in.Avoided.Avoids(pairA, t0.Add(14*time.Minute)) {
		t.Fatal("the pair is avoided for exactly the avoid time")
	}
	// With no Avoided map and nothing claimed, the failed pair itself is
	// never the retry's.
	in = (&pool{}).stopped(2, pairA).input(2, 2, 0)
	in.Avoided = nil
	if f := PoolStartFailed(in, PoolOrder{ID: "p-0", Pair: pairA, For: 2}, nil); f.Retry != nil || f.Jobs != 2 {
		t.Fatalf("failure %+v: the only other stopped instance is on the failed pair", f)
	}
}

// randomPool is a pool in every state with workers busy, idle, draining
// and unresponsive on its running instances.
func randomPool(r *rand.Rand) PoolInput {
	p := &pool{}
	pairs := []Pair{pairA, pairB, pairC}
	states := []PoolState{PoolPreparing, PoolStopped, PoolStarting, PoolRunning, PoolStopping, PoolInterrupted, PoolGone}
	for range r.IntN(12) {
		pair := pairs[r.IntN(3)]
		st := states[r.IntN(len(states))]
		p.add(pair, st, time.Duration(r.IntN(30))*time.Minute)
		p.inst[len(p.inst)-1].Created = t0.Add(-time.Duration(r.IntN(400)) * time.Hour)
		if (st == PoolRunning || st == PoolStarting) && r.IntN(4) > 0 {
			id := p.inst[len(p.inst)-1].ID
			p.workers = append(p.workers, Worker{ID: "w-" + id, InstanceID: id, Leases: r.IntN(3),
				Draining: r.IntN(5) == 0, LastSeen: t0.Add(-time.Duration(r.IntN(200)) * time.Second),
				IdleSince: t0.Add(-time.Duration(r.IntN(600)) * time.Second)})
		}
	}
	in := p.input(r.IntN(10), r.IntN(12), r.IntN(5))
	in.Others = r.IntN(12)
	for _, pair := range pairs {
		if r.IntN(3) == 0 {
			in.Avoided[pair] = t0.Add(time.Duration(r.IntN(20)-5) * time.Minute)
		}
	}
	return in
}

// Over random pools, no decision stops or ends an instance whose worker
// holds a lease.
func TestDecidePoolNeverStopsAnInstanceHoldingALease(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 5000 {
		in := randomPool(r)
		leased := map[string]bool{}
		for _, w := range in.Workers {
			if w.Leases > 0 {
				leased[w.InstanceID] = true
			}
		}
		d := DecidePool(in)
		for _, o := range append(append([]PoolOrder(nil), d.Stops...), d.Ends...) {
			if leased[o.ID] {
				t.Fatalf("case %d: %s holds a lease and is stopped or ended: %s", i, o.ID, o.Reason)
			}
		}
	}
}

// Over random pools, neither the wake nor the tick starts an instance that
// is not stopped (an interrupted one above all: only EC2 starts it), or one
// on an avoided pair, or one past the fleet's max.
func TestPoolNeverStartsAnInterruptedInstance(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 9))
	starts := 0
	for i := range 5000 {
		in := randomPool(r)
		state := map[string]PoolState{}
		for _, p := range in.Pool {
			state[p.ID] = p.State
		}
		for _, d := range []PoolDecision{PoolStart(in), DecidePool(in)} {
			if len(d.Starts) > 0 && in.Others+d.Live > in.Settings.Max {
				t.Fatalf("case %d: %d starts take the fleet to %d + %d instances, past its max %d", i, len(d.Starts), in.Others, d.Live, in.Settings.Max)
			}
			seen := map[string]bool{}
			for _, s := range d.Starts {
				starts++
				if state[s.ID] != PoolStopped || seen[s.ID] || in.Avoided.Avoids(s.Pair, t0) {
					t.Fatalf("case %d: started %s in state %s on %s (avoided %v, twice %v)", i, s.ID, state[s.ID], s.Pair, in.Avoided.Avoids(s.Pair, t0), seen[s.ID])
				}
				seen[s.ID] = true
			}
		}
	}
	if starts == 0 {
		t.Fatal("no start in any case: the property is not exercised")
	}
}

// Jobs leased on pool instances keep the idle clock of a fleet with a
// bridge running, as the bridges' own do.
func TestDecideBridgeCountsThePoolsLeases(t *testing.T) {
	t.Parallel()
	in := bridged((&fleet{}).worker(0, 0), 2, 0, 0)
	in.LastActiveAt = t0.Add(-time.Hour)
	in.Elsewhere = 2
	d := DecideBridge(in)
	if !d.LastActiveAt.Equal(t0) || !strings.Contains(d.Reason.String(), "(2 more leased on bridges or pool instances)") {
		t.Fatalf("last active %s, reason %q: the pool's leases are work", d.LastActiveAt, d.Reason)
	}
}
