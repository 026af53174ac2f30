package sim

import (
	"testing"
	"time"
)

// estimateRuns are the runs docs/simulation.md ("Estimates") reports: each
// built-in workload over enough days for a few hundred submits, seed 1,
// the default options of fleetq simulate.
var estimateRuns = []struct {
	workload string
	days     int
}{{"regen3d", 1}, {"video", 3}, {"backtest", 7}}

// goalStartEstimatesWithinTheGoal holds the goal docs/simulation.md records
// as met: 80% of the start estimates made at submit, and 80% of those made
// at later ticks, within max(60s, 20% of the wait) of the actual lease.
func goalStartEstimatesWithinTheGoal(t *testing.T) {
	for _, c := range estimateRuns {
		w, _ := BuiltIn(c.workload, 1, c.days)
		r := Run(w, NewFleetq(nil), Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45, Estimates: true})
		es := r.Estimates
		if es == nil {
			t.Fatalf("%s: no estimates measured", c.workload)
		}
		// Every job is estimated once at its submit, and every estimate is
		// checked against a lease.
		if es.AtSubmit.Estimates != r.Jobs || es.Unresolved != 0 || es.AtTicks.Estimates == 0 {
			t.Errorf("%s: %d estimates at submit of %d jobs, %d at ticks, %d not leased", c.workload, es.AtSubmit.Estimates, r.Jobs, es.AtTicks.Estimates, es.Unresolved)
		}
		for _, m := range []struct {
			when string
			a    Accuracy
		}{{"at submit", es.AtSubmit}, {"at later ticks", es.AtTicks}} {
			if m.a.Share() < 0.8 {
				t.Errorf("%s over %d days: %.0f%% of %d estimates %s within the goal, want 80%%", c.workload, c.days, 100*m.a.Share(), m.a.Estimates, m.when)
			}
		}
	}
}

// Only fleetq's policy is estimated, and only when asked.
func TestEstimatesAreMeasuredWhenAsked(t *testing.T) {
	t.Parallel()
	w, _ := BuiltIn("backtest", 1, 1)
	if r := Run(w, NewFleetq(nil), Options{Seed: 1}); r.Estimates != nil {
		t.Fatal("estimates measured without Options.Estimates")
	}
	if r := Run(w, NewKEDA(), Options{Seed: 1, Estimates: true}); r.Estimates != nil {
		t.Fatal("estimates measured under a baseline: the projection runs fleetq's rules")
	}
}

// An estimate is within the goal when it is off by at most a minute, or by
// at most a fifth of the wait from the estimate to the lease; one with no
// start is a miss.
func TestAnEstimateIsWithinAMinuteOrAFifthOfTheWait(t *testing.T) {
	t.Parallel()
	m := time.Minute
	var a Accuracy
	a.add(5*m, 0, 6*m, true)                // off by 1m of a 6m wait: within
	a.add(4*m-70*time.Second, 0, 4*m, true) // off by 70s of a 4m wait: out
	a.add(40*m, 0, 50*m, true)              // off by 10m of a 50m wait: within (a fifth)
	a.add(40*m, 0, 51*m, true)              // off by 11m of a 51m wait: out
	a.add(0, 0, 30*time.Second, false)
	if a.Estimates != 5 || a.Within != 2 || a.Unknown != 1 || a.Waited != 4 || a.WaitedWithin != 2 {
		t.Fatalf("%+v: want 2 of 5 within, 1 unknown, 4 made more than a minute ahead", a)
	}
}

// While Spot is short, a job that needs new capacity waits on Spot: with
// an On-Demand rung its start is the rung's launch a boot later, and holds
// to the goal; without one it cannot be said.
func TestEstimatesWhileSpotIsShort(t *testing.T) {
	t.Parallel()
	w, _ := BuiltIn("backtest", 1, 1)
	o := Options{Seed: 1, SpotRate: 0.01, Estimates: true, SpotShortages: []Span{{From: 3 * time.Hour, To: 5 * time.Hour}}}
	rung := o
	rung.FallbackAfter = 10 * time.Minute
	for _, c := range []struct {
		name string
		o    Options
		ok   func(a *Accuracy) bool
	}{
		{"with a rung", rung, func(a *Accuracy) bool { return a.Unknown == 0 && a.Share() >= 0.8 }},
		{"without one", o, func(a *Accuracy) bool { return a.Unknown == a.Estimates }},
	} {
		r := Run(w, policyMakers["fleetq"](c.o), c.o)
		a := r.Estimates.ByCode["spot_unavailable"]
		if a == nil || a.Estimates == 0 || !c.ok(a) {
			t.Errorf("%s: estimates waiting on Spot %+v", c.name, a)
		}
	}
}
