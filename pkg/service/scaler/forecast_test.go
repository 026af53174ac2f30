package scaler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/forecast"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// withForecast turns the forecast on with a budget and seeds the fleet's
// memory with yesterday's 09:00 hour: 12 jobs arrived, 6 were ready or
// leased on average.
func withForecast(h *harness, budgetHours float64) {
	h.t.Helper()
	h.sys.Store.Config().Fleets[0].Forecast = fleetconfig.Forecast{Enabled: true, BudgetGPUHoursPerDay: budgetHours, LookbackDays: 7}
	yesterday := t0.Add(-24 * time.Hour)
	mem := fleetstate.Forecast{Hours: forecast.History{forecast.HourOf(yesterday): {Arrivals: 12, Work: 6, Ticks: 1}}, At: t0.Add(-time.Minute)}
	d := fleetstate.Decision{At: t0.Add(-time.Minute), Reason: scaling.RecordedReason("", "seed")}
	if err := h.sys.Store.RecordDecision(h.ctx, "gpu", fleetstate.Record{Decision: d, Forecast: &mem}, fleetstate.State{}); err != nil {
		h.t.Fatal(err)
	}
}

// With yesterday's 09:00 in its memory the fleet is raised at 09:00 before
// any job: 6 concurrent plus 12/h over the 5m lead is 7 slots, 4
// instances of 2 slots. The tick's arrivals join today's hour.
func TestForecastRaisesTheFleetAheadOfItsUsualHour(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	withForecast(h, 10)
	r := h.tick()
	if r.Desired != 4 || !strings.Contains(r.Decision.Reason.String(), "forecast: 12.0 jobs/h and 6.0 concurrent expected (1 days) → 4") {
		t.Fatalf("desired %d (%s)", r.Desired, r.Decision.Reason)
	}
	h.advance(30 * time.Second)
	h.submit(3, "j")
	h.advance(30 * time.Second)
	h.tick()
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	today := st.Forecast.Hours[forecast.HourOf(t0)]
	if today.Arrivals != 3 || today.Ticks != 2 || today.Work != 3 {
		t.Fatalf("today's hour %+v, want 3 arrivals over 2 ticks, 3 jobs of work", today)
	}
	// 4 instances above none for the first minute, then 2 above the 2 the
	// 3 jobs need.
	if st.Forecast.Budget.Spent != 6*time.Minute {
		t.Fatalf("spent %s, want 6m", st.Forecast.Budget.Spent)
	}
}

// The budget caps what the forecast adds, and once spent the forecast
// rests and says so; the spend is kept in the fleet's state.
func TestForecastStopsWhenItsBudgetIsSpent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	withForecast(h, 0.05) // 3 instance-minutes
	var r = h.tick()
	if r.Desired != 1 || !strings.Contains(r.Decision.Reason.String(), "(budget caps 4)") {
		t.Fatalf("first tick: desired %d (%s)", r.Desired, r.Decision.Reason)
	}
	for range 3 {
		h.advance(time.Minute)
		r = h.tick()
	}
	if !strings.Contains(r.Decision.Reason.String(), "asks for 4, budget spent") {
		t.Fatalf("after 3 instance-minutes: desired %d (%s)", r.Desired, r.Decision.Reason)
	}
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if st.Forecast.Budget.Spent != 3*time.Minute || st.Forecast.Budget.Day != "2026-11-23" {
		t.Fatalf("budget %+v, want 3m spent on 2026-11-23", st.Forecast.Budget)
	}
}
