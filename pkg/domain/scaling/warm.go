package scaling

import (
	"fmt"
	"strings"
	"time"
)

// warmFloor is the capacity the fleet's open warm windows ask for at now:
// the largest of their minimums and of the work's need plus their spare
// instances, clamped to the fleet's min and max, with the words for the
// reason. Zero when no window is open.
func warmFloor(s Settings, now time.Time, work int) (int, string) {
	var atLeast, spare int
	var open []string
	for _, w := range s.Warm {
		if !w.Active(now) {
			continue
		}
		atLeast, spare = max(atLeast, w.MinInstances), max(spare, w.SpareInstances)
		open = append(open, w.From+"-"+w.To)
	}
	if len(open) == 0 {
		return 0, ""
	}
	floor := clamp(s.Min, s.Max, max(atLeast, ceilDiv(work, s.Slots)+spare))
	var parts []string
	if atLeast > 0 {
		parts = append(parts, fmt.Sprintf("at least %d", atLeast))
	}
	if spare > 0 {
		parts = append(parts, fmt.Sprintf("%d spare", spare))
	}
	return floor, "warm " + strings.Join(open, ", ") + ": " + strings.Join(parts, " and ")
}
