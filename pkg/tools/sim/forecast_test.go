package sim

import (
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// The forecast on three diurnal regen3d days (the first has no history):
// with 20 GPU-hours a day it takes the median wait below the boot and
// below cold fleetq's, within 15% of the oracle's GPU-hours, and spends no
// more than its budget over the cold run.
func goalForecastBeatsTheBootOnRegen3D(t *testing.T) {
	const days, budget = 3, 20.0
	w, _ := BuiltIn("regen3d", 1, days)
	o := Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45}
	cold, _ := Simulate(w, []string{"fleetq", "oracle"}, o)
	o.Forecast = fleetconfig.Forecast{Enabled: true, BudgetGPUHoursPerDay: budget}
	warm, _ := Simulate(w, []string{"fleetq"}, o)
	f, c, or := warm.Results[0], cold.Results[0], cold.Results[1]
	if f.Killed != 0 || f.Completed != f.Jobs {
		t.Fatalf("forecast fleetq killed %d, completed %d of %d", f.Killed, f.Completed, f.Jobs)
	}
	if boot := (3 * time.Minute).Seconds(); f.P50WaitS >= boot || f.P50WaitS >= c.P50WaitS {
		t.Errorf("forecast p50 wait %.0fs, cold %.0fs: want below both and below the %.0fs boot", f.P50WaitS, c.P50WaitS, boot)
	}
	if f.GPUHours > 1.15*or.GPUHours {
		t.Errorf("forecast fleetq billed %.1f GPU-h, more than 15%% over the oracle's %.1f", f.GPUHours, or.GPUHours)
	}
	if f.GPUHours <= c.GPUHours || f.GPUHours > c.GPUHours+budget*days {
		t.Errorf("forecast billed %.1f GPU-h, cold %.1f: want more, by at most the %g GPU-h budget of %d days", f.GPUHours, c.GPUHours, budget, days)
	}
}

// On the bursty video days the forecast buys little wait: it learns that
// the working hours are busy, not when the next burst comes. What it must
// hold there is its budget: no more GPU-hours over the cold run than the
// budget of the days it had history for.
func TestForecastOnVideoStaysWithinItsBudget(t *testing.T) {
	t.Parallel()
	const days, budget = 3, 10.0
	w, _ := BuiltIn("video", 1, days)
	o := Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45}
	cold, _ := Simulate(w, []string{"fleetq"}, o)
	o.Forecast = fleetconfig.Forecast{Enabled: true, BudgetGPUHoursPerDay: budget}
	warm, _ := Simulate(w, []string{"fleetq"}, o)
	f, c := warm.Results[0], cold.Results[0]
	if f.Killed != 0 || f.Completed != f.Jobs {
		t.Fatalf("forecast fleetq killed %d, completed %d of %d", f.Killed, f.Completed, f.Jobs)
	}
	if f.GPUHours <= c.GPUHours || f.GPUHours > c.GPUHours+budget*(days-1) {
		t.Errorf("forecast billed %.1f GPU-h, cold %.1f: want more, by at most the %g GPU-h budget of the %d days with history", f.GPUHours, c.GPUHours, budget, days-1)
	}
}
