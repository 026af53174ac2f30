package scaling

import (
	"strings"
	"testing"
	"time"
)

// ladder builds a two-group input from a fleet: the instances named in od
// are On-Demand; each group's desired is its instance count.
func ladder(f *fleet, ready, leased int, shortFor time.Duration, od ...string) LadderInput {
	in := LadderInput{Input: f.input(ready, leased), OnDemand: map[string]bool{}, After: 10 * time.Minute}
	for _, id := range od {
		in.OnDemand[id] = true
	}
	for _, inst := range f.inst {
		if in.OnDemand[inst.ID] {
			in.OnDemandDesired++
		} else {
			in.SpotDesired++
		}
	}
	if shortFor > 0 {
		in.SpotShortSince = t0.Add(-shortFor)
	}
	return in
}

func TestDecideLadder(t *testing.T) {
	cases := []struct {
		name           string
		in             LadderInput
		rung           string
		spot, onDemand int
		victims        string
		drain          string
		reason         string
	}{
		{name: "Spot available: every launch on Spot", in: ladder(&fleet{}, 6, 0, 0), rung: RungSpot, spot: 3, onDemand: 0},
		{name: "Spot short within the wait: keep waiting for Spot", in: func() LadderInput {
			i := ladder(&fleet{}, 6, 0, 4*time.Minute)
			i.SpotDesired = 3 // asked for, not launched
			return i
		}(), rung: RungSpot, spot: 3, onDemand: 0, reason: "Spot short for 4m0s (fallback after 10m0s)"},
		{name: "Spot short past the wait: launches move to On-Demand, one Spot probe kept", in: func() LadderInput {
			i := ladder(&fleet{}, 6, 0, 11*time.Minute)
			i.SpotDesired = 3
			return i
		}(), rung: RungOnDemand, spot: 1, onDemand: 3, reason: "on-demand rung: Spot short for 11m0s (fallback after 10m0s), launch 3 On-Demand"},
		{name: "on the On-Demand rung busy Spot instances stay and count", in: func() LadderInput {
			i := ladder((&fleet{}).worker(2, 0).worker(2, 0), 4, 4, 20*time.Minute)
			i.SpotDesired = 4
			return i
		}(), rung: RungOnDemand, spot: 3, onDemand: 2},
		{name: "no fallback configured: wait for Spot however long", in: func() LadderInput {
			i := ladder(&fleet{}, 6, 0, time.Hour)
			i.SpotDesired, i.After = 3, 0
			return i
		}(), rung: RungSpot, spot: 3, onDemand: 0},
		{name: "wait SLO: Spot short and the oldest job waited past it: On-Demand before fallback_after", in: func() LadderInput {
			i := ladder(&fleet{}, 6, 0, 2*time.Minute)
			i.SpotDesired, i.WaitSLO, i.OldestReadyWait = 3, 5*time.Minute, 7*time.Minute
			return i
		}(), rung: RungOnDemand, spot: 1, onDemand: 3, reason: "on-demand rung: oldest job waited 7m (wait SLO 5m), Spot short for 2m0s (fallback after 10m0s), launch 3 On-Demand"},
		{name: "wait SLO not yet passed: Spot rung", in: func() LadderInput {
			i := ladder(&fleet{}, 6, 0, 2*time.Minute)
			i.SpotDesired, i.WaitSLO, i.OldestReadyWait = 3, 5*time.Minute, 4*time.Minute
			return i
		}(), rung: RungSpot, spot: 3, onDemand: 0, reason: "Spot short for 2m0s (fallback after 10m0s)"},
		{name: "wait SLO passed but Spot not short: Spot rung (the wait is not Spot's doing)", in: func() LadderInput {
			i := ladder(&fleet{}, 6, 0, 0)
			i.SpotDesired, i.WaitSLO, i.OldestReadyWait = 3, 5*time.Minute, time.Hour
			return i
		}(), rung: RungSpot, spot: 3, onDemand: 0},
		{name: "no wait SLO: a long wait changes nothing before fallback_after", in: func() LadderInput {
			i := ladder(&fleet{}, 6, 0, 2*time.Minute)
			i.SpotDesired, i.OldestReadyWait = 3, time.Hour
			return i
		}(), rung: RungSpot, spot: 3, onDemand: 0},
		{name: "wait SLO without an On-Demand rung: nothing to move to", in: func() LadderInput {
			i := ladder(&fleet{}, 6, 0, 2*time.Minute)
			i.SpotDesired, i.After, i.WaitSLO, i.OldestReadyWait = 3, 0, 5*time.Minute, time.Hour
			return i
		}(), rung: RungSpot, spot: 3, onDemand: 0},
		{name: "past fallback_after the reason is fallback_after's, whatever the wait", in: func() LadderInput {
			i := ladder(&fleet{}, 6, 0, 11*time.Minute)
			i.SpotDesired, i.WaitSLO, i.OldestReadyWait = 3, 5*time.Minute, 20*time.Minute
			return i
		}(), rung: RungOnDemand, spot: 1, onDemand: 3, reason: "on-demand rung: Spot short for 11m0s (fallback after 10m0s), launch 3 On-Demand"},
		{name: "Spot back: idle On-Demand goes, its place launched on Spot", in: ladder((&fleet{}).worker(2, 0).worker(0, 5*time.Minute), 2, 2, 0, "i-1"),
			rung: RungSpot, spot: 2, onDemand: 0, victims: "i-1:on-demand", reason: "terminate 1 idle On-Demand (Spot is back)"},
		{name: "Spot back: even within the grace", in: ladder((&fleet{}).worker(2, 0).worker(0, time.Minute), 2, 2, 0, "i-1"),
			rung: RungSpot, spot: 2, onDemand: 0, victims: "i-1:on-demand"},
		{name: "Spot back: busy On-Demand is drained, kept until done, its place launched on Spot", in: ladder((&fleet{}).worker(2, 0).worker(2, 0), 0, 4, 0, "i-1"),
			rung: RungSpot, spot: 2, onDemand: 1, drain: "i-1", reason: "drain 1 busy On-Demand (Spot is back)"},
		{name: "jobs preempted to the cap get On-Demand capacity even with Spot available", in: func() LadderInput {
			i := ladder((&fleet{}).worker(2, 0), 3, 2, 0)
			i.OnDemandOnlyReady = 3
			return i
		}(), rung: RungSpot, spot: 1, onDemand: 2, reason: "3 jobs preempted to the cap keep 2 On-Demand, launch 2 On-Demand"},
		{name: "On-Demand workers serving such jobs are not retired when Spot is back", in: func() LadderInput {
			i := ladder((&fleet{}).worker(1, 0).worker(0, 5*time.Minute), 1, 1, 0, "i-1")
			i.OnDemandOnlyReady = 1
			return i
		}(), rung: RungSpot, spot: 1, onDemand: 1},
		{name: "a pinned job running on On-Demand keeps its worker; the Spot work is decided apart", in: func() LadderInput {
			i := ladder((&fleet{}).worker(1, 0).worker(1, 0), 4, 2, 0, "i-1")
			i.OnDemandOnlyLeased = 1
			return i
		}(), rung: RungSpot, spot: 3, onDemand: 1, victims: "", reason: "1 jobs preempted to the cap keep 1 On-Demand"},
		{name: "shrinking takes On-Demand first even if Spot is still short", in: func() LadderInput {
			i := ladder((&fleet{}).worker(0, 30*time.Minute).worker(0, 5*time.Minute).worker(1, 0), 2, 1, 3*time.Minute, "i-1")
			return i
		}(), rung: RungSpot, spot: 2, onDemand: 0, victims: "i-1:idle"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := DecideLadder(c.in)
			if d.Rung != c.rung || d.SpotDesired != c.spot || d.OnDemandDesired != c.onDemand || victimIDs(d.Decision) != c.victims {
				t.Errorf("rung %s spot %d on-demand %d victims %q, want %s %d %d %q (%s)", d.Rung, d.SpotDesired, d.OnDemandDesired, victimIDs(d.Decision), c.rung, c.spot, c.onDemand, c.victims, d.Reason)
			}
			if got := strings.Join(d.Drain, ","); got != c.drain {
				t.Errorf("drain %q, want %q", got, c.drain)
			}
			if d.Desired != d.SpotDesired+d.OnDemandDesired {
				t.Errorf("desired %d is not spot %d + on-demand %d", d.Desired, d.SpotDesired, d.OnDemandDesired)
			}
			if !strings.Contains(d.Reason.String(), c.reason) {
				t.Errorf("reason %q does not contain %q", d.Reason, c.reason)
			}
		})
	}
}
