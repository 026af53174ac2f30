package fleetconfig

import "time"

// Forecast raises a fleet ahead of the demand its own history expects: for
// the hour ahead, the scaler averages what the same UTC hour brought on the
// last LookbackDays days (jobs arrived, concurrent work) and holds the
// instances for that work plus the jobs expected to arrive within Lead.
// The instance-hours it holds beyond what the policy wants anyway are
// capped by BudgetGPUHoursPerDay; the idle window and the scale-in grace
// still take the warm workers once the forecast no longer asks for them.
type Forecast struct {
	// Enabled turns the forecast on.
	Enabled bool `yaml:"enabled"`
	// BudgetGPUHoursPerDay is the instance-hours a UTC day the forecast may
	// hold beyond what the policy wants without it (an instance per GPU:
	// GPU-hours); once spent, the forecast rests until midnight UTC.
	// Required when enabled.
	BudgetGPUHoursPerDay float64 `yaml:"budget_gpu_hours_per_day"`
	// LookbackDays is how many earlier days the forecast averages (1 to
	// 28; default 7).
	LookbackDays int `yaml:"lookback_days"`
	// Lead is how far ahead the forecast looks, and the window of arrivals
	// it holds slots for: about the time an instance takes to boot
	// (default 5m, at most 1h).
	Lead Duration `yaml:"lead"`
}

// DefaultForecastLookbackDays and DefaultForecastLead apply when the
// forecast is on and leaves them out.
const (
	DefaultForecastLookbackDays = 7
	DefaultForecastLead         = 5 * time.Minute
)

// Lookback is LookbackDays or its default.
func (f Forecast) Lookback() int {
	if f.LookbackDays > 0 {
		return f.LookbackDays
	}
	return DefaultForecastLookbackDays
}

// LeadTime is Lead or its default.
func (f Forecast) LeadTime() time.Duration {
	if f.Lead > 0 {
		return f.Lead.Std()
	}
	return DefaultForecastLead
}

// Budget is BudgetGPUHoursPerDay as a duration of instance-time.
func (f Forecast) Budget() time.Duration {
	return time.Duration(f.BudgetGPUHoursPerDay * float64(time.Hour))
}

func (f *Fleet) validateForecast(at string, k *checker) {
	fc := f.Forecast
	at += ".forecast"
	if b := fc.BudgetGPUHoursPerDay; b < 0 || b > 24*MaxInstancesLimit {
		k.add(at+".budget_gpu_hours_per_day", "must be between 0 and %d, got %g", 24*MaxInstancesLimit, b)
	} else if fc.Enabled && b == 0 {
		k.add(at+".budget_gpu_hours_per_day", "is required when the forecast is enabled (instance-hours a day it may hold warm)")
	}
	if fc.LookbackDays < 0 || fc.LookbackDays > 28 {
		k.add(at+".lookback_days", "must be between 1 and 28 (0: the default %d), got %d", DefaultForecastLookbackDays, fc.LookbackDays)
	}
	if d := fc.Lead.Std(); d < 0 || d > time.Hour {
		k.add(at+".lead", "must be between 0s (the default %s) and 1h, got %s", DefaultForecastLead, fc.Lead)
	}
}
