package sim

import (
	"slices"
	"testing"
	"time"
)

// Two hours without Spot capacity mid-morning. Without an On-Demand rung
// fleetq's jobs wait for Spot to return; with one, no job waits longer
// than the fallback wait plus a boot plus a tick or two, nothing is
// killed, and On-Demand instances stop with the jobs they run when Spot
// returns (they take no new work).
func goalSpotShortageFallsBackToOnDemand(t *testing.T) {
	const after = 10 * time.Minute
	shortage := Span{From: 10 * time.Hour, To: 12 * time.Hour}
	for _, name := range []string{"video", "regen3d"} {
		w, _ := BuiltIn(name, 1, 1)
		o := Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45, SpotShortages: []Span{shortage}}
		stuck, _ := Simulate(w, []string{"fleetq"}, o)
		o.FallbackAfter = after
		ladder, _ := Simulate(w, []string{"fleetq"}, o)
		s, l := stuck.Results[0], ladder.Results[0]
		bound := (after + 5*time.Minute + 2*time.Minute).Seconds() // fallback wait + the longest boot + two ticks
		if s.MaxWaitS <= bound || s.SpotLaunchFailures == 0 || s.OnDemandLaunches != 0 {
			t.Errorf("%s without a rung: longest wait %.0fs, %d failed Spot launches, %d On-Demand: the shortage should bite", name, s.MaxWaitS, s.SpotLaunchFailures, s.OnDemandLaunches)
		}
		if l.Killed != 0 || l.Completed != l.Jobs {
			t.Errorf("%s: killed %d, completed %d of %d", name, l.Killed, l.Completed, l.Jobs)
		}
		if l.MaxWaitS > bound {
			t.Errorf("%s with the rung: longest wait %.0fs > %.0fs", name, l.MaxWaitS, bound)
		}
		longest := slices.MaxFunc(w.Jobs, func(a, b JobSpec) int { return int(a.Duration - b.Duration) }).Duration
		if l.OnDemandLaunches == 0 || l.OnDemandEndS < shortage.To.Seconds() || l.OnDemandEndS > (shortage.To+longest).Seconds() {
			t.Errorf("%s: %d On-Demand launches, the last ended at %.2fh: want some, ending within the longest job (%s) after Spot returns at %s",
				name, l.OnDemandLaunches, l.OnDemandEndS/3600, longest, shortage.To)
		}
		if l.OnDemandStartsAfterSpot != 0 {
			t.Errorf("%s: %d jobs started on On-Demand after Spot returned", name, l.OnDemandStartsAfterSpot)
		}
		if want := (l.GPUHours-l.OnDemandGPUHours)*o.PricePerHour + l.OnDemandGPUHours*DefaultOnDemandPrice; l.CostUSD < want-1e-9 || l.CostUSD > want+1e-9 {
			t.Errorf("%s: cost %.2f, want Spot hours × Spot price + On-Demand hours × On-Demand price = %.2f", name, l.CostUSD, want)
		}
	}
}

func TestParseSpan(t *testing.T) {
	t.Parallel()
	if sp, err := ParseSpan("10h-12h30m"); err != nil || sp.From != 10*time.Hour || sp.To != 12*time.Hour+30*time.Minute {
		t.Fatalf("%+v %v", sp, err)
	}
	for _, bad := range []string{"", "10h", "12h-10h", "x-1h", "-1h-2h"} {
		if _, err := ParseSpan(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Spot taken away once an instance-hour: jobs preempted five times go dead
// without an On-Demand rung; with one they finish on On-Demand instances.
func TestJobsPreemptedToTheCapMoveToOnDemand(t *testing.T) {
	t.Parallel()
	w, _ := BuiltIn("backtest", 1, 1)
	o := Options{Seed: 1, SpotRate: 1, PricePerHour: 0.45}
	plain, _ := Simulate(w, []string{"fleetq"}, o)
	o.FallbackAfter = 10 * time.Minute
	rung, _ := Simulate(w, []string{"fleetq"}, o)
	p, r := plain.Results[0], rung.Results[0]
	if p.Dead == 0 || p.Completed+p.Dead != p.Jobs {
		t.Fatalf("without a rung: %d dead, %d completed of %d: want some dead at the cap", p.Dead, p.Completed, p.Jobs)
	}
	if r.Dead != 0 || r.Completed != r.Jobs || r.PinnedToOnDemand == 0 || r.OnDemandLaunches == 0 || r.Killed != 0 {
		t.Fatalf("with a rung: %d dead, %d completed of %d, %d pinned, %d On-Demand launches, %d killed", r.Dead, r.Completed, r.Jobs, r.PinnedToOnDemand, r.OnDemandLaunches, r.Killed)
	}
}

// With a wait SLO well under fallback_after, the longest wait through the
// shortage is bounded by the SLO, not by fallback_after.
func TestSpotShortageWaitSLO(t *testing.T) {
	t.Parallel()
	const after, slo = 60 * time.Minute, 5 * time.Minute
	shortage := Span{From: 10 * time.Hour, To: 12 * time.Hour}
	w, _ := BuiltIn("video", 1, 1)
	o := Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45, SpotShortages: []Span{shortage}, FallbackAfter: after}
	plain, _ := Simulate(w, []string{"fleetq"}, o)
	o.WaitSLO = slo
	fast, _ := Simulate(w, []string{"fleetq"}, o)
	p, f := plain.Results[0], fast.Results[0]
	bound := (slo + 5*time.Minute + 2*time.Minute).Seconds() // the SLO + the longest boot + two ticks
	if p.MaxWaitS <= bound {
		t.Fatalf("without the SLO the longest wait is %.0fs: fallback_after %s should show", p.MaxWaitS, after)
	}
	if f.MaxWaitS > bound || f.Killed != 0 || f.Completed != f.Jobs || f.OnDemandLaunches == 0 {
		t.Fatalf("with wait SLO %s: longest wait %.0fs (bound %.0fs), killed %d, completed %d of %d, %d On-Demand launches",
			slo, f.MaxWaitS, bound, f.Killed, f.Completed, f.Jobs, f.OnDemandLaunches)
	}
}
