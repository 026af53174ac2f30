package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Hotspot is a Spot interruption rate for one instance type in one zone,
// in place of Options.SpotRate there (fleetq simulate --spot-hotspot).
type Hotspot struct {
	Type, Zone string
	// Rate is Spot interruptions per instance-hour of that type in that
	// zone.
	Rate float64
	// From and To bound when the rate holds (To zero: to the end).
	From, To time.Duration
}

// DefaultSpotTypes are the instance types of a simulated fleet whose config
// names none.
var DefaultSpotTypes = []string{"g5.xlarge", "g6.xlarge", "g4dn.xlarge"}

// SpotZones are the simulated fleet's availability zones.
var SpotZones = []string{"a", "b", "c"}

// ParseHotspot reads TYPE@ZONE=RATE[,FROM-TO] ("g5.xlarge@a=2,10h-12h").
func ParseHotspot(v string) (Hotspot, error) {
	bad := fmt.Errorf("hot spot %q: want TYPE@ZONE=RATE[,FROM-TO], a rate of interruptions per instance-hour >= 0 (e.g. g5.xlarge@a=2 or g5.xlarge@a=2,10h-12h)", v)
	where, rest, ok := strings.Cut(v, "=")
	if !ok {
		return Hotspot{}, bad
	}
	typ, zone, ok := strings.Cut(where, "@")
	if !ok || typ == "" || zone == "" {
		return Hotspot{}, bad
	}
	rate, span, hasSpan := strings.Cut(rest, ",")
	r, err := strconv.ParseFloat(rate, 64)
	if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return Hotspot{}, bad
	}
	h := Hotspot{Type: typ, Zone: zone, Rate: r}
	if hasSpan {
		sp, err := ParseSpan(span)
		if err != nil {
			return Hotspot{}, bad
		}
		h.From, h.To = sp.From, sp.To
	}
	return h, nil
}

// spotWeigher is a policy that weighs down interrupted Spot types and
// zones when it launches (fleetq's: the scaler's WeighSpot).
type spotWeigher interface{ weighsSpot() bool }

// interruption is one simulated Spot interruption, for the weighing.
type interruption struct {
	at time.Duration
	tz scaling.TypeZone
}

// spotPlacement is where the Spot group launches: the types and zones of
// the fleet, the order and zones weighing leaves, and the next zone of
// the round robin.
type spotPlacement struct {
	types, zones []string
	weighing     scaling.Weighting
	next         int
	window       time.Duration
	threshold    int
	recent       []interruption
	// Reason is the weighing's last answer (for tests and debugging).
	reason string
}

func newSpotPlacement(o Options) *spotPlacement {
	p := &spotPlacement{types: DefaultSpotTypes, zones: SpotZones,
		window: scaling.DefaultInterruptionWindow, threshold: scaling.DefaultZoneInterruptions}
	if f := o.Fleet; f != nil {
		if len(f.InstanceTypes) > 0 {
			p.types = f.InstanceTypes
		}
		if d := f.Spot.InterruptionWindow.Std(); d > 0 {
			p.window = d
		}
		if f.Spot.ZoneInterruptions > 0 {
			p.threshold = f.Spot.ZoneInterruptions
		}
	}
	p.weighing = scaling.Weighting{Types: p.types, Zones: p.zones}
	return p
}

// place picks a launch's type and zone: the first type of the order (the
// group is capacity-optimized-prioritized) in the next zone of the round
// robin over the zones it may use.
func (p *spotPlacement) place() (string, string) {
	zs := p.weighing.Zones
	z := zs[p.next%len(zs)]
	p.next++
	return p.weighing.Types[0], z
}

// interrupted records an interruption for the weighing.
func (p *spotPlacement) interrupted(at time.Duration, typ, zone string) {
	p.recent = append(p.recent, interruption{at: at, tz: scaling.TypeZone{Type: typ, Zone: zone}})
}

// weigh runs the scaler's rule over the interruptions of the window, with
// occupied the Spot instances per zone.
func (p *spotPlacement) weigh(now time.Duration, occupied map[string]int) {
	k := 0
	for k < len(p.recent) && p.recent[k].at <= now-p.window {
		k++
	}
	p.recent = p.recent[k:]
	counts := map[scaling.TypeZone]int{}
	for _, r := range p.recent {
		counts[r.tz]++
	}
	p.weighing = scaling.WeighSpot(scaling.WeighInput{Types: p.types, Zones: p.zones, Interrupted: counts,
		Window: p.window, ZoneThreshold: p.threshold, Occupied: occupied})
	p.reason = p.weighing.Reason
}

// spotLife draws when a Spot instance of typ in zone launched at now is
// interrupted, as a lifetime, and whether it is within reach (ok false:
// never). Without a hot spot for the instance it draws as the flat rate
// always has (one exponential draw when the rate is above zero), so runs
// without hot spots keep their numbers.
func (e *engine) spotLife(typ, zone string) (time.Duration, bool) {
	var hots []Hotspot
	for _, h := range e.opt.SpotHotspots {
		if h.Type == typ && h.Zone == zone {
			hots = append(hots, h)
		}
	}
	if len(hots) == 0 {
		if e.opt.SpotRate <= 0 {
			return 0, false
		}
		return time.Duration(e.rng.ExpFloat64() / e.opt.SpotRate * float64(time.Hour)), true
	}
	rate := func(t time.Duration) float64 {
		for _, h := range hots {
			if t >= h.From && (h.To <= 0 || t < h.To) {
				return h.Rate
			}
		}
		return e.opt.SpotRate
	}
	// The hazard changes only at the hot spots' bounds: walk the pieces
	// until the cumulative hazard reaches a unit exponential draw.
	var cuts []time.Duration
	for _, h := range hots {
		cuts = append(cuts, h.From)
		if h.To > 0 {
			cuts = append(cuts, h.To)
		}
	}
	need := e.rng.ExpFloat64()
	t := e.now
	for t < e.opt.Horizon {
		end := e.opt.Horizon
		for _, c := range cuts {
			if c > t && c < end {
				end = c
			}
		}
		r := rate(t)
		if r > 0 {
			piece := r * (end - t).Hours()
			if piece >= need {
				return t - e.now + time.Duration(need/r*float64(time.Hour)), true
			}
			need -= piece
		}
		t = end
	}
	return 0, false
}
