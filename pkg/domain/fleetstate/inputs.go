package fleetstate

import (
	"maps"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Inputs are the numbers a scaling decision was made from, recorded with
// it. Each part is set by the decision that saw it and nil otherwise: a
// tick's counts (with its On-Demand rung, weighing and forecast when the
// fleet has them), a wake's, or the bridges started on enqueue; a decision
// made between ticks also says the desired capacity it changed. Records
// and the API keep them as a map of counts under the keys named with each
// field (Map), the layout every release reads and writes.
type Inputs struct {
	Tick     *TickInputs
	Wake     *WakeInputs
	Bridge   *BridgeStartInputs
	Change   *DesiredChange
	Ladder   *LadderInputs
	Weighing *WeighInputs
	Forecast *ForecastInputs
	// other are counts under keys this release does not know (a later
	// release's), kept so that rewriting a fleet's history loses none.
	other map[string]int
}

// TickInputs are a tick's counts (scaling.Counts, and the jobs waiting
// out a retry backoff).
type TickInputs struct {
	Ready        int // ready
	Leased       int // leased
	Delayed      int // delayed
	Need         int // need
	Instances    int // instances
	Booting      int // booting
	Busy         int // busy
	Idle         int // idle
	Draining     int // draining
	Unresponsive int // unresponsive
	Unhealthy    int // unhealthy
	// CapHeld counts the ready jobs tenant caps keep from running now
	// (cap_held, kept only when some are).
	CapHeld int
}

// WakeInputs are a wake on enqueue's counts.
type WakeInputs struct {
	Ready   int // ready: the jobs that woke the fleet
	Workers int // workers: the fleet's registered workers then
}

// BridgeStartInputs are the counts bridges were started from on enqueue.
type BridgeStartInputs struct {
	Ready           int // ready
	Idle            int // idle: idle active workers
	FreeSlots       int // free_slots: of workers and bridges running or starting
	OnDemandDesired int // on_demand_desired: the bridge group's desired capacity after
}

// DesiredChange is the recorded desired capacity before and after a
// decision made between ticks (desired_before, desired_after).
type DesiredChange struct {
	Before, After int
}

// LadderInputs are a tick's On-Demand rung.
type LadderInputs struct {
	// OnDemandRung is set when new capacity went to On-Demand
	// (on_demand_rung, 1 or 0).
	OnDemandRung      bool
	SpotShortSeconds  int // spot_short_seconds
	SpotDesired       int // spot_desired
	OnDemandDesired   int // on_demand_desired
	OnDemandInstances int // on_demand_instances
	DrainedOnDemand   int // drained_on_demand
	// Bridge is set for a tick decided by the fleet's bridge.
	Bridge *LadderBridgeInputs
}

// LadderBridgeInputs are a bridge's part of a tick.
type LadderBridgeInputs struct {
	Start   int // bridge_start
	Bridges int // bridges
	Leased  int // bridge_leased
}

// WeighInputs are a tick's weighing of its Spot types and zones.
type WeighInputs struct {
	TypesInterrupted int  // spot_types_interrupted
	Zones            int  // spot_zones
	ZonesDropped     int  // spot_zones_dropped
	Placed           bool // spot_placed, 1 or 0
}

// ForecastInputs are a tick's forecast.
type ForecastInputs struct {
	Instances int // forecast: the instances the forecast asked for
	Extra     int // forecast_extra: those it added to the work's need
}

// NewTickInputs are a tick's inputs from the policy's counts, the delayed
// jobs and those tenant caps hold back; the tick adds its rung, weighing
// and forecast parts.
func NewTickInputs(c scaling.Counts, delayed, capHeld int) Inputs {
	return Inputs{Tick: &TickInputs{Ready: c.Ready, Leased: c.Leased, Delayed: delayed, Need: c.Need,
		Instances: c.Instances, Booting: c.Booting, Busy: c.Busy, Idle: c.Idle, Draining: c.Draining,
		Unresponsive: c.Unresponsive, Unhealthy: c.Unhealthy, CapHeld: capHeld}}
}

// NewWakeInputs are a wake's inputs: the ready jobs that woke the fleet, its
// workers, and its recorded desired capacity before and after.
func NewWakeInputs(ready, workers, before, after int) Inputs {
	return Inputs{Wake: &WakeInputs{Ready: ready, Workers: workers}, Change: &DesiredChange{Before: before, After: after}}
}

// NewBridgeStartInputs are the inputs of bridges started on enqueue; the
// store adds the desired capacity it changed (Changed).
func NewBridgeStartInputs(ready, idle, freeSlots, onDemandDesired int) Inputs {
	return Inputs{Bridge: &BridgeStartInputs{Ready: ready, Idle: idle, FreeSlots: freeSlots, OnDemandDesired: onDemandDesired}}
}

// Changed is the inputs with the recorded desired capacity before and
// after the decision.
func (in Inputs) Changed(before, after int) Inputs {
	in.Change = &DesiredChange{Before: before, After: after}
	return in
}

// inputField is one count of the stored map.
type inputField struct {
	key string
	get func() int
	set func(int)
	// omitZero leaves the key out when the count is 0.
	omitZero bool
}

func count(key string, v *int) inputField {
	return inputField{key: key, get: func() int { return *v }, set: func(n int) { *v = n }}
}

func flag(key string, v *bool) inputField {
	return inputField{key: key, get: func() int {
		if *v {
			return 1
		}
		return 0
	}, set: func(n int) { *v = n != 0 }}
}

// inputPart is one part of Inputs as stored: present when its marker key
// is, with its fields.
type inputPart struct {
	marker string
	// fields answers the part's fields, allocating the part when alloc is
	// set; nil when it is absent and alloc is not.
	fields func(alloc bool) []inputField
}

// part is the part *at() holds (at answers nil when the part has no place
// yet), with its fields.
func part[T any](marker string, at func() **T, fields func(*T) []inputField) inputPart {
	return inputPart{marker: marker, fields: func(alloc bool) []inputField {
		p := at()
		if p == nil {
			return nil
		}
		if *p == nil && alloc {
			*p = new(T)
		}
		if *p == nil {
			return nil
		}
		return fields(*p)
	}}
}

// parts lists every part of the inputs and its keys: the one layout Map
// writes and InputsFrom reads. A part nested in another comes after it.
func (in *Inputs) parts() []inputPart {
	return []inputPart{
		part("need", func() **TickInputs { return &in.Tick }, func(t *TickInputs) []inputField {
			capHeld := count("cap_held", &t.CapHeld)
			capHeld.omitZero = true
			return []inputField{count("ready", &t.Ready), count("leased", &t.Leased), count("delayed", &t.Delayed),
				count("need", &t.Need), count("instances", &t.Instances), count("booting", &t.Booting),
				count("busy", &t.Busy), count("idle", &t.Idle), count("draining", &t.Draining),
				count("unresponsive", &t.Unresponsive), count("unhealthy", &t.Unhealthy), capHeld}
		}),
		part("workers", func() **WakeInputs { return &in.Wake }, func(w *WakeInputs) []inputField {
			return []inputField{count("ready", &w.Ready), count("workers", &w.Workers)}
		}),
		part("free_slots", func() **BridgeStartInputs { return &in.Bridge }, func(b *BridgeStartInputs) []inputField {
			return []inputField{count("ready", &b.Ready), count("idle", &b.Idle), count("free_slots", &b.FreeSlots),
				count("on_demand_desired", &b.OnDemandDesired)}
		}),
		part("desired_before", func() **DesiredChange { return &in.Change }, func(c *DesiredChange) []inputField {
			return []inputField{count("desired_before", &c.Before), count("desired_after", &c.After)}
		}),
		part("on_demand_rung", func() **LadderInputs { return &in.Ladder }, func(l *LadderInputs) []inputField {
			return []inputField{flag("on_demand_rung", &l.OnDemandRung), count("spot_short_seconds", &l.SpotShortSeconds),
				count("spot_desired", &l.SpotDesired), count("on_demand_desired", &l.OnDemandDesired),
				count("on_demand_instances", &l.OnDemandInstances), count("drained_on_demand", &l.DrainedOnDemand)}
		}),
		part("bridge_start", func() **LadderBridgeInputs {
			if in.Ladder == nil {
				return nil
			}
			return &in.Ladder.Bridge
		}, func(b *LadderBridgeInputs) []inputField {
			return []inputField{count("bridge_start", &b.Start), count("bridges", &b.Bridges), count("bridge_leased", &b.Leased)}
		}),
		part("spot_zones", func() **WeighInputs { return &in.Weighing }, func(w *WeighInputs) []inputField {
			return []inputField{count("spot_types_interrupted", &w.TypesInterrupted), count("spot_zones", &w.Zones),
				count("spot_zones_dropped", &w.ZonesDropped), flag("spot_placed", &w.Placed)}
		}),
		part("forecast", func() **ForecastInputs { return &in.Forecast }, func(f *ForecastInputs) []inputField {
			return []inputField{count("forecast", &f.Instances), count("forecast_extra", &f.Extra)}
		}),
	}
}

// Map is the inputs as records and the API keep them; nil when there are
// none.
func (in Inputs) Map() map[string]int {
	m := maps.Clone(in.other)
	for _, p := range in.parts() {
		for _, f := range p.fields(false) {
			if v := f.get(); v != 0 || !f.omitZero {
				if m == nil {
					m = map[string]int{}
				}
				m[f.key] = v
			}
		}
	}
	return m
}

// InputsFrom reads inputs as Map writes them, and as every release wrote
// them: each part whose marker key is there, and the counts under keys
// it does not know kept as they are.
func InputsFrom(m map[string]int) Inputs {
	var in Inputs
	known := map[string]bool{}
	for _, p := range in.parts() {
		if _, ok := m[p.marker]; !ok {
			continue
		}
		for _, f := range p.fields(true) {
			f.set(m[f.key])
			known[f.key] = true
		}
	}
	for k, v := range m {
		if !known[k] {
			if in.other == nil {
				in.other = map[string]int{}
			}
			in.other[k] = v
		}
	}
	return in
}
