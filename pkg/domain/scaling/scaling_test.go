package scaling

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func settings() Settings {
	return Settings{Slots: 2, Min: 0, Max: 10, IdleWindow: 15 * time.Minute, ScaleInGrace: 2 * time.Minute,
		BootTimeout: 10 * time.Minute, Unresponsive: 90 * time.Second}
}

// fleet builds instances i-0..i-(n-1), each with a worker w-i seen now.
type fleet struct {
	inst    []Instance
	workers []Worker
}

func (f *fleet) worker(leases int, idleFor time.Duration) *fleet {
	id := fmt.Sprintf("i-%d", len(f.inst))
	f.inst = append(f.inst, Instance{ID: id, LifecycleState: StateInService, FirstSeen: t0.Add(-time.Hour)})
	f.workers = append(f.workers, Worker{ID: "w-" + id, InstanceID: id, Leases: leases, LastSeen: t0, IdleSince: t0.Add(-idleFor)})
	return f
}

func (f *fleet) booting(age time.Duration) *fleet {
	id := fmt.Sprintf("i-%d", len(f.inst))
	f.inst = append(f.inst, Instance{ID: id, LifecycleState: StatePending, FirstSeen: t0.Add(-age)})
	return f
}

func (f *fleet) input(ready, leased int) Input {
	return Input{Now: t0, Settings: settings(), Ready: ready, Leased: leased, Desired: len(f.inst),
		Instances: f.inst, Workers: f.workers, LastActiveAt: t0.Add(-time.Minute)}
}

func victimIDs(d Decision) string {
	var s []string
	for _, v := range d.Victims {
		s = append(s, v.InstanceID+":"+v.Why)
	}
	return strings.Join(s, ",")
}

func TestDecide(t *testing.T) {
	cases := []decideCase{
		{name: "from zero", in: (&fleet{}).input(5, 0), desired: 3, launch: 3, reason: "grow 0→3: 5 ready + 0 leased need 3"},
		{name: "one job wakes one", in: (&fleet{}).input(1, 0), desired: 1, launch: 1},
		{name: "leased work counts as much as queued", in: (&fleet{}).worker(2, 0).worker(2, 0).input(4, 4), desired: 4, launch: 2},
		{name: "booting instances are capacity on the way", in: (&fleet{}).booting(time.Minute).booting(time.Minute).input(4, 0), desired: 2, launch: 0, reason: "hold 2"},
		{name: "asked-for launches not yet started are on the way",
			in: func() Input { i := (&fleet{}).input(6, 0); i.Desired = 3; return i }(), desired: 3, launch: 0},
		{name: "clamped to max", in: (&fleet{}).input(100, 0), desired: 10, launch: 10, reason: "(max 10)"},
		{name: "min kept with no work", in: func() Input {
			i := (&fleet{}).input(0, 0)
			i.Settings.Min = 2
			i.LastActiveAt = time.Time{}
			return i
		}(), desired: 2, launch: 2},
		{name: "idle window not over: hold", in: (&fleet{}).worker(0, 10*time.Minute).worker(0, 10*time.Minute).input(0, 0), desired: 2, reason: "hold 2: no work for 1m0s of the 15m0s idle window"},
		{name: "idle window over: to zero", in: func() Input {
			i := (&fleet{}).worker(0, 20*time.Minute).worker(0, 20*time.Minute).input(0, 0)
			i.LastActiveAt = t0.Add(-16 * time.Minute)
			return i
		}(), desired: 0, victims: "i-0:idle,i-1:idle", reason: "shrink 2→0: no work for 16m0s"},
		{name: "window over but a worker idle within grace is kept", in: func() Input {
			i := (&fleet{}).worker(0, 20*time.Minute).worker(0, time.Minute).input(0, 0)
			i.LastActiveAt = t0.Add(-16 * time.Minute)
			return i
		}(), desired: 1, victims: "i-0:idle", reason: "keep 1 idle within the 2m0s grace"},
		{name: "shrink by idle only, longest idle first", in: (&fleet{}).worker(1, 0).worker(0, 3*time.Minute).worker(0, 9*time.Minute).worker(0, 5*time.Minute).input(0, 3),
			desired: 2, victims: "i-2:idle,i-3:idle"},
		{name: "never a worker with a lease", in: (&fleet{}).worker(1, time.Hour).worker(1, time.Hour).worker(1, time.Hour).input(0, 1), desired: 3},
		{name: "never an instance still booting", in: func() Input {
			i := (&fleet{}).booting(5*time.Minute).booting(5*time.Minute).input(0, 0)
			i.LastActiveAt = t0.Add(-time.Hour)
			return i
		}(), desired: 2},
		{name: "booting past the timeout is unhealthy and replaced", in: (&fleet{}).booting(11*time.Minute).input(1, 0),
			desired: 1, launch: 1, victims: "i-0:unhealthy", reason: "terminate 1 never registered in 10m0s"},
		{name: "in service but never registered past the timeout", in: func() Input {
			f := (&fleet{}).booting(12 * time.Minute)
			f.inst[0].LifecycleState = StateInService
			return f.input(0, 0)
		}(), desired: 0, victims: "i-0:unhealthy"},
		{name: "draining busy is not capacity, replaced", in: func() Input {
			f := (&fleet{}).worker(2, 0)
			f.workers[0].Draining = true
			return f.input(0, 2)
		}(), desired: 2, launch: 1},
		{name: "drained and done is terminated", in: func() Input {
			f := (&fleet{}).worker(0, 0).worker(1, 0)
			f.workers[0].Draining = true
			return f.input(0, 1)
		}(), desired: 1, victims: "i-0:drained"},
		{name: "unresponsive with a lease is kept but not capacity", in: func() Input {
			f := (&fleet{}).worker(1, 0)
			f.workers[0].LastSeen = t0.Add(-5 * time.Minute)
			return f.input(0, 1)
		}(), desired: 2, launch: 1},
		{name: "unresponsive idle is terminated", in: func() Input {
			f := (&fleet{}).worker(0, 0)
			f.workers[0].LastSeen = t0.Add(-5 * time.Minute)
			return f.input(1, 0)
		}(), desired: 1, launch: 1, victims: "i-0:unresponsive"},
		{name: "max counts non-capacity instances", in: func() Input {
			f := (&fleet{}).worker(1, 0).worker(1, 0)
			f.workers[0].Draining = true
			i := f.input(10, 2)
			i.Settings.Max = 2
			return i
		}(), desired: 2, launch: 0},
	}
	runDecideCases(t, cases)
}

func TestIdleClock(t *testing.T) {
	in := (&fleet{}).worker(0, time.Hour).input(0, 0)
	in.LastActiveAt = t0.Add(-14 * time.Minute)
	d := Decide(in)
	if d.Desired != 1 || !d.LastActiveAt.Equal(in.LastActiveAt) {
		t.Fatalf("within the window: desired %d last active %v", d.Desired, d.LastActiveAt)
	}
	in.Ready = 1
	if d := Decide(in); !d.LastActiveAt.Equal(t0) {
		t.Fatalf("work resets the idle clock to now, got %v", d.LastActiveAt)
	}
	in.Ready = 0
	in.Now = t0.Add(time.Minute)
	if d := Decide(in); d.Desired != 0 {
		t.Fatalf("after the window: desired %d (%s)", d.Desired, d.Reason)
	}
}

// The seed investigation's bug: every message is acknowledged at receive, so
// the queue reads empty while all work is leased and runs far longer than the
// idle window. The policy counts the job records, so desired never drops
// below the busy workers and no busy worker is ever a victim.
func TestSeedRegressionBusyWorkersSurviveAnEmptyQueue(t *testing.T) {
	s := settings()
	s.Slots = 1
	f := &fleet{}
	for range 4 {
		f.worker(1, 0)
	}
	busy := map[string]bool{}
	for _, w := range f.workers {
		busy[w.InstanceID] = true
	}
	last := t0
	for minute := range 90 { // jobs run 90 minutes; the idle window is 15
		now := t0.Add(time.Duration(minute) * time.Minute)
		for i := range f.workers {
			f.workers[i].LastSeen = now
		}
		d := Decide(Input{Now: now, Settings: s, Ready: 0, Leased: 4, Desired: 4, Instances: f.inst, Workers: f.workers, LastActiveAt: last})
		last = d.LastActiveAt
		if d.Desired < 4 {
			t.Fatalf("minute %d: desired %d below 4 busy workers (%s)", minute, d.Desired, d.Reason)
		}
		for _, v := range d.Victims {
			if busy[v.InstanceID] {
				t.Fatalf("minute %d: busy instance %s chosen as victim (%s)", minute, v.InstanceID, d.Reason)
			}
		}
	}
}

func TestNeed(t *testing.T) {
	s := settings()
	for _, c := range []struct{ work, want int }{{0, 0}, {1, 1}, {2, 1}, {3, 2}, {1000, 10}} {
		if got := Need(s, c.work); got != c.want {
			t.Errorf("Need(%d) = %d, want %d", c.work, got, c.want)
		}
	}
}

func TestSettingsOf(t *testing.T) {
	cfg := fleetconfig.Default()
	f := &cfg.Fleets[0]
	s := SettingsOf(f)
	if s.Slots != f.SlotsPerInstance || s.Max != f.MaxInstances || s.IdleWindow != f.IdleWindow.Std() || s.Unresponsive != 3*f.HeartbeatInterval() {
		t.Fatalf("settings %+v from fleet %+v", s, f)
	}
}

func TestSettingsOfCarriesTheSpotPool(t *testing.T) {
	f := &fleetconfig.Fleet{MaxInstances: 10, SpotPool: fleetconfig.SpotPool{Size: 4, VolumeGB: 80, MaxAgeHours: 24, AvoidMinutes: 5,
		Pairs: []fleetconfig.SpotPoolPair{{InstanceType: "g5.xlarge", Zone: "us-east-1a"}, {InstanceType: "g6.xlarge", Zone: "us-east-1b"}}}}
	p := SettingsOf(f).SpotPool
	if p.Size != 4 || p.VolumeGB != 80 || p.MaxAge != 24*time.Hour || p.Avoid != 5*time.Minute ||
		len(p.Pairs) != 2 || p.Pairs[0] != (Pair{"g5.xlarge", "us-east-1a"}) || p.Pairs[1] != (Pair{"g6.xlarge", "us-east-1b"}) {
		t.Fatalf("spot pool settings %+v", p)
	}
	if p := SettingsOf(&fleetconfig.Fleet{}).SpotPool; p.Size != 0 || p.Pairs != nil {
		t.Fatalf("a fleet without a pool: %+v", p)
	}
}

func TestInstanceStates(t *testing.T) {
	for _, c := range []struct {
		state              string
		booting, inService bool
	}{
		{StateInService, false, true},
		{StatePending, true, false},
		{StatePendingWait, true, false},
		{StatePendingProceed, true, false},
		{"Terminating:Wait", false, false},
		{"Standby", false, false},
		{"", false, false},
	} {
		in := Instance{ID: "i-1", LifecycleState: c.state}
		if in.Booting() != c.booting || in.InService() != c.inService {
			t.Errorf("%q: booting %v in service %v, want %v %v", c.state, in.Booting(), in.InService(), c.booting, c.inService)
		}
	}
}

// decideCase is one row of a Decide table: the input and what the
// decision must say.
type decideCase struct {
	name    string
	in      Input
	desired int
	launch  int
	victims string
	reason  string
}

func runDecideCases(t *testing.T, cases []decideCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.in)
			if d.Desired != c.desired || d.Launch != c.launch || victimIDs(d) != c.victims {
				t.Errorf("desired %d launch %d victims %q, want %d %d %q (reason %q)", d.Desired, d.Launch, victimIDs(d), c.desired, c.launch, c.victims, d.Reason)
			}
			if !strings.Contains(d.Reason.String(), c.reason) {
				t.Errorf("reason %q does not contain %q", d.Reason, c.reason)
			}
		})
	}
}
