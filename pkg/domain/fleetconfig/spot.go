package fleetconfig

import "time"

// Defaults of the Spot weighting (docs/scaling.md, "Weighing down
// interrupted types and zones").
const (
	DefaultInterruptionWindow = time.Hour
	DefaultZoneInterruptions  = 3
)

// Spot tunes how the scaler steers the fleet's Spot group away from the
// instance types and zones Spot interrupted recently.
type Spot struct {
	// InterruptionWindow is how far back Spot interruptions count: an
	// instance type interrupted within it is tried after the types
	// interrupted less, and a zone with ZoneInterruptions in it is left out
	// of the group (1m to 24h; default 1h).
	InterruptionWindow Duration `yaml:"interruption_window"`
	// ZoneInterruptions is how many Spot interruptions within the window
	// take a zone out of the group until they age out of it; the least
	// interrupted zone always stays (1 to 10000; default 3).
	ZoneInterruptions int `yaml:"zone_interruptions"`
}

func (s *Spot) applyDefaults() {
	if s.InterruptionWindow == 0 {
		s.InterruptionWindow = Duration(DefaultInterruptionWindow)
	}
	if s.ZoneInterruptions == 0 {
		s.ZoneInterruptions = DefaultZoneInterruptions
	}
}

func (f *Fleet) validateSpot(at string, k *checker) {
	if d := f.Spot.InterruptionWindow.Std(); d < time.Minute || d > 24*time.Hour {
		k.add(at+".spot.interruption_window", "must be between 1m and 24h, got %s", f.Spot.InterruptionWindow)
	}
	k.rangeInt(at+".spot.zone_interruptions", f.Spot.ZoneInterruptions, 1, 10000)
}
