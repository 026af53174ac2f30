package scaling

import (
	"testing"
	"time"
)

func TestDecideForecast(t *testing.T) {
	with := func(in Input, instances, budgetCap int) Input {
		in.Forecast = Forecast{Instances: instances, Cap: budgetCap, Expected: "30.0 jobs/h and 4.0 concurrent expected (7 days)"}
		return in
	}
	var noForecast Decision
	cases := []decideCase{
		{name: "raises an empty fleet ahead of the expected work", in: with((&fleet{}).input(0, 0), 3, 10),
			desired: 3, launch: 3, reason: "forecast: 30.0 jobs/h and 4.0 concurrent expected (7 days) → 3"},
		{name: "the budget caps what it adds", in: with((&fleet{}).input(0, 0), 3, 1),
			desired: 1, launch: 1, reason: "→ 1 (budget caps 3)"},
		{name: "a spent budget adds nothing and says so", in: with((&fleet{}).input(0, 0), 3, 0),
			desired: 0, reason: "forecast: 30.0 jobs/h and 4.0 concurrent expected (7 days) asks for 3, budget spent"},
		{name: "work above the forecast is not raised further", in: with((&fleet{}).input(10, 0), 2, 10), desired: 5, launch: 5},
		{name: "the forecast stays within max", in: with((&fleet{}).input(0, 0), 40, 100), desired: 10, launch: 10},
		{name: "warm idle workers are kept while it asks for them", in: func() Input {
			i := with((&fleet{}).worker(0, time.Hour).worker(0, time.Hour).input(0, 0), 2, 10)
			i.LastActiveAt = t0.Add(-time.Hour)
			return i
		}(), desired: 2},
		{name: "when it no longer asks the idle window and grace take them", in: func() Input {
			i := with((&fleet{}).worker(0, time.Hour).worker(0, time.Minute).input(0, 0), 0, 10)
			i.LastActiveAt = t0.Add(-time.Hour)
			return i
		}(), desired: 1, victims: "i-0:idle", reason: "keep 1 idle within the 2m0s grace"},
	}
	runDecideCases(t, cases)
	// The instances added are reported, for the budget.
	if d := Decide(with((&fleet{}).input(1, 0), 3, 10)); d.ForecastExtra != 2 {
		t.Errorf("forecast extra %d, want 2 (3 asked, 1 needed): %s", d.ForecastExtra, d.Reason)
	}
	if noForecast = Decide((&fleet{}).input(0, 0)); noForecast.ForecastExtra != 0 || noForecast.Desired != 0 {
		t.Errorf("without a forecast: %+v", noForecast)
	}
}
