package scaler

import (
	"maps"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/forecast"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// maxForecastInterval bounds the time one tick books against the budget,
// and the span of arrivals it counts, when ticks were missed.
const maxForecastInterval = 5 * time.Minute

// planForecast adds this tick's sample to the fleet's forecast memory and
// hands the decision what the same hour of the last days expects at the
// lead, capped by what is left of today's budget. It answers the memory to
// write with the decision, and the interval the tick books (nil for a
// fleet without a forecast).
func planForecast(f *fleetconfig.Fleet, snap snapshot, in *scaling.Input) (*fleetstate.Forecast, time.Duration) {
	fc := f.Forecast
	if !fc.Enabled {
		return nil, 0
	}
	now, mem := snap.now, snap.state.Forecast
	interval := time.Minute
	if !mem.At.IsZero() && now.After(mem.At) {
		interval = min(now.Sub(mem.At), maxForecastInterval)
	}
	work := in.Ready + in.Leased
	hours := maps.Clone(mem.Hours).Observe(now, snap.backlog.ArrivedAfter(now.Add(-interval)), work)
	hours.Prune(now, fc.Lookback())
	e := forecast.Expect(hours, now.Add(fc.LeadTime()), fc.Lookback())
	budget := mem.Budget.On(now)
	in.Forecast = scaling.Forecast{
		Instances: e.Instances(work, fc.LeadTime(), f.SlotsPerInstance),
		Cap:       forecast.Cap(budget.Left(now, fc.Budget())),
		Expected:  e.String(),
	}
	return &fleetstate.Forecast{Hours: hours, Budget: budget, At: now}, interval
}
