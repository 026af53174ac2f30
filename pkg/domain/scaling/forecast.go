package scaling

import "fmt"

// Forecast is the capacity a fleet's own history expects ahead
// (pkg/domain/forecast), as the scaler hands it to the decision.
type Forecast struct {
	// Instances is the capacity the forecast asks for (0: none).
	Instances int
	// Cap is the most instances the forecast may add to what the policy
	// wants without it: what the rest of its daily budget pays for.
	Cap int
	// Expected says what the forecast expects, for the reason.
	Expected string
}

// forecastFloor raises want to the forecast's instances, clamped to the
// fleet's max and to the budget's cap, and answers the instances added.
func forecastFloor(in Input, want int, why string) (int, string, int) {
	f, s := in.Forecast, in.Settings
	ask := clamp(s.Min, s.Max, f.Instances)
	if f.Instances <= 0 || ask <= want {
		return want, why, 0
	}
	extra := min(ask-want, f.Cap)
	if extra <= 0 {
		return want, why + fmt.Sprintf("; forecast: %s asks for %d, budget spent", f.Expected, ask), 0
	}
	why += fmt.Sprintf("; forecast: %s → %d", f.Expected, want+extra)
	if extra < ask-want {
		why += fmt.Sprintf(" (budget caps %d)", ask)
	}
	return want + extra, why, extra
}
