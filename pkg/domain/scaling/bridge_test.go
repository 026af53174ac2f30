package scaling

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// bridged builds a bridge input from a fleet: the instances named in
// bridge are bridge instances (started 5 minutes ago unless aged); each
// group's desired is its instance count.
func bridged(f *fleet, pool, ready, leased int, bridge ...string) BridgeInput {
	in := BridgeInput{Input: f.input(ready, leased), Bridges: map[string]bool{}}
	in.Settings.Bridge = BridgeSettings{Pool: pool, MaxLife: 30 * time.Minute}
	for _, id := range bridge {
		in.Bridges[id] = true
	}
	for i, inst := range f.inst {
		if in.Bridges[inst.ID] {
			if inst.FirstSeen.Equal(t0.Add(-time.Hour)) {
				f.inst[i].FirstSeen = t0.Add(-5 * time.Minute) // started from the pool 5 minutes ago
			}
			in.BridgeDesired++
		} else {
			in.SpotDesired++
		}
	}
	return in
}

// aged sets instance i's first-seen time to age ago.
func (f *fleet) aged(i int, age time.Duration) *fleet {
	f.inst[i].FirstSeen = t0.Add(-age)
	return f
}

func TestDecideBridge(t *testing.T) {
	cases := []struct {
		name          string
		in            BridgeInput
		spot, bridge  int
		start         int
		victims       string
		drain         string
		reason, notIn string
	}{
		{name: "wake from zero: Spot raised as without a bridge, the pool started for the work",
			in: bridged(&fleet{}, 2, 6, 0), spot: 3, bridge: 2, start: 2,
			reason: "grow 0→3: 6 ready + 0 leased need 3 × 2 slots; have 0 busy, 0 idle, 0 booting; launch 3; bridge 2: 6 ready jobs, 0 idle workers, Spot launching; bridge pool of 2 in use (1 more wanted)"},
		{name: "a pool larger than the work starts only what the work needs",
			in: bridged(&fleet{}, 8, 3, 0), spot: 2, bridge: 2, start: 2, notIn: "in use"},
		{name: "bridges already starting count: no second start for the same work",
			in:   func() BridgeInput { i := bridged(&fleet{}, 4, 6, 0); i.SpotDesired, i.BridgeDesired = 3, 3; return i }(),
			spot: 3, bridge: 3, start: 0, notIn: "bridge 0"},
		{name: "burst beyond running workers: bridges for the jobs the busy workers cannot take",
			in: bridged((&fleet{}).worker(2, 0).worker(1, 0), 4, 5, 3), spot: 4, bridge: 2, start: 2, reason: "bridge 2: 5 ready jobs, 0 idle workers, Spot launching"},
		{name: "free slots of running workers take the work: no bridge",
			in: bridged((&fleet{}).worker(0, time.Minute).worker(1, 0), 4, 3, 1), spot: 2, bridge: 0, start: 0, notIn: "bridge"},
		{name: "bridges hold the work, Spot in service idle within the grace: the bridges run on, nothing stops",
			in:   bridged((&fleet{}).worker(2, 0).worker(1, 0).worker(0, time.Minute), 2, 0, 3, "i-0", "i-1"),
			spot: 1, bridge: 2, reason: "(3 more leased on bridges or pool instances)"},
		{name: "bridges hold the work: Spot idle past the grace is shrunk, the busy bridges are not",
			in:   bridged((&fleet{}).worker(2, 0).worker(0, 3*time.Minute), 2, 0, 2, "i-0"),
			spot: 0, bridge: 1, victims: "i-1:idle"},
		{name: "an idle bridge goes back to the pool at once when Spot takes the work",
			in:   bridged((&fleet{}).worker(0, 10*time.Second).worker(0, 0).worker(1, 0), 2, 1, 1, "i-0"),
			spot: 2, bridge: 0, victims: "i-0:bridge", reason: "stop 1 idle bridge into the pool (the work needs no bridge)"},
		{name: "an idle bridge stays while ready work has no other slot",
			in:   bridged((&fleet{}).worker(0, 10*time.Second).booting(time.Minute), 2, 1, 0, "i-0"),
			spot: 1, bridge: 1, victims: ""},
		{name: "an idle bridge with no work goes back to the pool before idle Spot workers",
			in:   bridged((&fleet{}).worker(0, 30*time.Second).worker(0, 30*time.Second), 2, 0, 0, "i-0"),
			spot: 1, bridge: 0, victims: "i-0:bridge"},
		{name: "a busy bridge past its life is drained, never stopped",
			in:   bridged((&fleet{}).worker(2, 0).aged(0, 31*time.Minute), 2, 0, 2, "i-0"),
			spot: 0, bridge: 1, drain: "i-0", reason: "drain 1 busy bridge past its 30m (no new job)"},
		{name: "an idle bridge past its life goes back to the pool even with work waiting",
			in:   bridged((&fleet{}).worker(0, 0).aged(0, 31*time.Minute), 2, 2, 0, "i-0"),
			spot: 1, bridge: 1, start: 1, victims: "i-0:bridge", reason: "stop 1 bridge into the pool (past its 30m)"},
		{name: "a bridge drained for its life goes back to the pool once idle",
			in: func() BridgeInput {
				i := bridged((&fleet{}).worker(0, 0).aged(0, 40*time.Minute), 2, 0, 0, "i-0")
				i.Workers[0].Draining = true
				return i
			}(), spot: 0, bridge: 0, victims: "i-0:bridge"},
		{name: "a bridge drained for another cause (interruption, sick GPU) is terminated",
			in: func() BridgeInput {
				i := bridged((&fleet{}).worker(0, 0).aged(0, 5*time.Minute), 2, 0, 0, "i-0")
				i.Workers[0].Draining = true
				return i
			}(), spot: 0, bridge: 0, victims: "i-0:drained", reason: "terminate 1 bridge drained"},
		{name: "a bridge that never registers is terminated",
			in: bridged((&fleet{}).booting(11*time.Minute), 2, 1, 0, "i-0"), spot: 1, bridge: 1, start: 1, victims: "i-0:unhealthy", reason: "terminate 1 bridge never registered"},
		{name: "the idle clock runs while only bridges hold work",
			in: func() BridgeInput {
				i := bridged((&fleet{}).worker(1, 0).worker(0, 0), 2, 0, 1, "i-0")
				i.LastActiveAt = t0.Add(-time.Hour)
				return i
			}(), spot: 1, bridge: 1, notIn: "idle window"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := DecideBridge(c.in)
			if d.SpotDesired != c.spot || d.BridgeDesired != c.bridge || d.Start != c.start || d.Desired != c.spot+c.bridge {
				t.Errorf("spot %d bridge %d start %d desired %d, want %d %d %d; %s", d.SpotDesired, d.BridgeDesired, d.Start, d.Desired, c.spot, c.bridge, c.start, d.Reason)
			}
			if got := victimIDs(d.Decision); got != c.victims {
				t.Errorf("victims %q, want %q", got, c.victims)
			}
			if got := strings.Join(d.Drain, ","); got != c.drain {
				t.Errorf("drain %q, want %q", got, c.drain)
			}
			if !strings.Contains(d.Reason.String(), c.reason) || (c.notIn != "" && strings.Contains(d.Reason.String(), c.notIn)) {
				t.Errorf("reason %q: want %q in it, %q not", d.Reason, c.reason, c.notIn)
			}
		})
	}
}

func TestDecideBridgeKeepsTheIdleClockOnBridgeWork(t *testing.T) {
	in := bridged((&fleet{}).worker(1, 0), 2, 0, 1, "i-0")
	in.LastActiveAt = t0.Add(-time.Hour)
	if d := DecideBridge(in); !d.LastActiveAt.Equal(t0) {
		t.Fatalf("last active %s: a job running on a bridge is work", d.LastActiveAt)
	}
}

func TestBridgeStart(t *testing.T) {
	s := settings()
	s.Bridge.Pool = 3
	for _, c := range []struct{ ready, free, live, want int }{
		{6, 0, 0, 3}, {6, 0, 1, 2}, {6, 0, 3, 0}, {3, 0, 0, 2}, {4, 4, 0, 0}, {5, 4, 0, 1}, {0, 0, 0, 0}, {1, 2, 0, 0},
	} {
		if got := BridgeStart(s, c.ready, c.free, c.live); got != c.want {
			t.Errorf("BridgeStart(ready %d, free %d, live %d) = %d, want %d", c.ready, c.free, c.live, got, c.want)
		}
	}
	if got := BridgeStart(settings(), 6, 0, 0); got != 0 {
		t.Errorf("no pool started %d", got)
	}
}

// Whatever the fleet looks like, no instance holding a lease is a victim
// and the bridge never runs more instances than its pool.
func TestDecideBridgeNeverStopsABusyInstance(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for n := range 2000 {
		f := &fleet{}
		var bridge []string
		for i := range rng.IntN(8) {
			if rng.IntN(4) == 0 {
				f.booting(time.Duration(rng.IntN(15)) * time.Minute)
			} else {
				f.worker(rng.IntN(3), time.Duration(rng.IntN(300))*time.Second)
				f.workers[len(f.workers)-1].Draining = rng.IntN(5) == 0
				f.workers[len(f.workers)-1].LastSeen = t0.Add(-time.Duration(rng.IntN(120)) * time.Second)
			}
			f.aged(i, time.Duration(rng.IntN(60))*time.Minute)
			if rng.IntN(2) == 0 {
				bridge = append(bridge, fmt.Sprintf("i-%d", i))
			}
		}
		pool := len(bridge) + rng.IntN(3)
		in := bridged(f, pool, rng.IntN(10), 0, bridge...)
		for _, w := range f.workers {
			in.Leased += w.Leases
		}
		d := DecideBridge(in)
		leases := map[string]int{}
		for _, w := range f.workers {
			leases[w.InstanceID] = w.Leases
		}
		for _, v := range d.Victims {
			if leases[v.InstanceID] > 0 {
				t.Fatalf("case %d: victim %s holds %d leases; %s", n, v.InstanceID, leases[v.InstanceID], d.Reason)
			}
		}
		if d.BridgeDesired > pool {
			t.Fatalf("case %d: %d bridges with a pool of %d; %s", n, d.BridgeDesired, pool, d.Reason)
		}
	}
}
