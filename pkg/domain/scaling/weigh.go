package scaling

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// DefaultInterruptionWindow is how far back WeighSpot counts interruptions
// when the fleet does not say.
const DefaultInterruptionWindow = time.Hour

// DefaultZoneInterruptions is how many Spot interruptions in the window
// drop a zone when the fleet does not say.
const DefaultZoneInterruptions = 3

// WeighInput is a fleet's Spot placement and its recent interruptions.
type WeighInput struct {
	// Types are the fleet's instance types in configured priority order.
	Types []string
	// Zones are the availability zones of the fleet's subnets, in order.
	Zones []string
	// Interrupted counts the Spot interruptions of the window per instance
	// type and zone.
	Interrupted map[TypeZone]int
	// Window is how far back Interrupted counts (for the reason).
	Window time.Duration
	// ZoneThreshold is how many interruptions in the window take a zone
	// out; 0 or less never drops a zone.
	ZoneThreshold int
	// Occupied counts the group's instances per zone. A zone with
	// instances is never dropped: Auto Scaling replaces the instances of a
	// zone taken out of the group's subnets, which would end busy workers.
	Occupied map[string]int
}

// TypeZone names an instance type in an availability zone.
type TypeZone struct{ Type, Zone string }

// Weighting is WeighSpot's answer.
type Weighting struct {
	// Types are every configured type, the interrupted ones moved down:
	// fewest interruptions first, configured order among equals.
	Types []string
	// Zones are the zones to launch in: the configured ones less those
	// that reached the threshold, never none.
	Zones []string
	// Reason says what moved and why; empty when nothing did.
	Reason string
}

// WeighSpot weighs down the instance types and zones Spot interrupted
// recently. Every type stays (the group may still launch it when the
// others have no capacity) but a type interrupted in the window goes
// after those interrupted less, so capacity-optimized-prioritized tries
// it last. A zone with ZoneThreshold interruptions or more in the window
// is left out of the group's subnets until the window passes it by, once
// the group has no instance left there (a zone taken out of the subnets has
// its instances replaced, busy or not); when
// every zone reached the threshold, the least interrupted one stays (the
// first configured among equals), so the group can always launch.
func WeighSpot(in WeighInput) Weighting {
	byType := map[string]int{}
	byZone := map[string]int{}
	for tz, n := range in.Interrupted {
		if n <= 0 {
			continue
		}
		byType[tz.Type] += n
		byZone[tz.Zone] += n
	}
	out := Weighting{Types: slices.Clone(in.Types)}
	sort.SliceStable(out.Types, func(a, b int) bool { return byType[out.Types[a]] < byType[out.Types[b]] })

	var dropped, held []string
	for _, z := range in.Zones {
		if in.ZoneThreshold > 0 && byZone[z] >= in.ZoneThreshold && in.Occupied[z] > 0 {
			held = append(held, z)
		}
		if in.ZoneThreshold > 0 && byZone[z] >= in.ZoneThreshold && in.Occupied[z] == 0 {
			dropped = append(dropped, z)
			continue
		}
		out.Zones = append(out.Zones, z)
	}
	if len(out.Zones) == 0 && len(in.Zones) > 0 {
		keep := in.Zones[0]
		for _, z := range in.Zones[1:] {
			if byZone[z] < byZone[keep] {
				keep = z
			}
		}
		out.Zones = []string{keep}
		dropped = slices.DeleteFunc(dropped, func(z string) bool { return z == keep })
	}

	var parts []string
	var moved, counts []string
	for _, t := range out.Types {
		if byType[t] > 0 {
			moved = append(moved, t)
			counts = append(counts, fmt.Sprint(byType[t]))
		}
	}
	if len(moved) > 0 {
		noun := "interruptions"
		if len(counts) == 1 && counts[0] == "1" {
			noun = "interruption"
		}
		parts = append(parts, fmt.Sprintf("spot types: %s last (%s %s in %s)",
			strings.Join(moved, ", "), strings.Join(counts, ", "), noun, shortDuration(in.Window)))
	}
	if len(dropped) > 0 {
		var ds []string
		for _, z := range dropped {
			ds = append(ds, fmt.Sprintf("%s (%d)", z, byZone[z]))
		}
		p := fmt.Sprintf("spot zones: without %s (%d or more interruptions in %s)", strings.Join(ds, ", "), in.ZoneThreshold, shortDuration(in.Window))
		if k := out.Zones[0]; len(out.Zones) == 1 && byZone[k] >= in.ZoneThreshold {
			p += fmt.Sprintf(", %s kept as the least interrupted (%d)", k, byZone[k])
		}
		parts = append(parts, p)
	}
	if len(held) > 0 {
		var hs []string
		for _, z := range held {
			hs = append(hs, fmt.Sprintf("%s (%d interruptions, %d instances)", z, byZone[z], in.Occupied[z]))
		}
		parts = append(parts, fmt.Sprintf("spot zones: %s kept while instances run there", strings.Join(hs, ", ")))
	}
	out.Reason = strings.Join(parts, "; ")
	return out
}

// shortDuration prints 1h for 1h0m0s and 90m for 1h30m0s.
func shortDuration(d time.Duration) string {
	switch {
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
