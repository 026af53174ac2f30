package fleetstate

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// A tick's inputs are written under the keys every release wrote, zeros
// included (a reader tells "0 busy" from "not counted"), cap_held only when
// caps held some back; read back, they are the same inputs.
func TestTickInputsKeepTheirKeys(t *testing.T) {
	t.Parallel()
	c := scaling.Counts{Ready: 6, Leased: 2, Need: 4, Instances: 3, Booting: 1, Busy: 2, Idle: 0, Draining: 0, Unresponsive: 0, Unhealthy: 0}
	in := NewTickInputs(c, 1, 0)
	in.Ladder = &LadderInputs{OnDemandRung: true, SpotShortSeconds: 300, SpotDesired: 1, OnDemandDesired: 2,
		Bridge: &LadderBridgeInputs{Start: 1, Bridges: 1, Leased: 0}}
	in.Weighing = &WeighInputs{TypesInterrupted: 1, Zones: 2}
	in.Forecast = &ForecastInputs{Instances: 4, Extra: 2}
	m := in.Map()
	want := []string{"booting", "bridge_leased", "bridge_start", "bridges", "busy", "delayed", "drained_on_demand",
		"draining", "forecast", "forecast_extra", "idle", "instances", "leased", "need", "on_demand_desired",
		"on_demand_instances", "on_demand_rung", "ready", "spot_desired", "spot_placed", "spot_short_seconds",
		"spot_types_interrupted", "spot_zones", "spot_zones_dropped", "unhealthy", "unresponsive"}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
		t.Fatalf("keys %v\nwant %v", got, want)
	}
	if m["ready"] != 6 || m["delayed"] != 1 || m["on_demand_rung"] != 1 || m["spot_placed"] != 0 || m["forecast_extra"] != 2 {
		t.Fatalf("counts %v", m)
	}
	if back := InputsFrom(m); !reflect.DeepEqual(back, in) {
		t.Fatalf("read back %+v, want %+v", back, in)
	}
	if m := NewTickInputs(c, 0, 48).Map(); m["cap_held"] != 48 {
		t.Fatalf("cap_held %v", m)
	}
}

// Inputs as a release before this one wrote them read into their parts:
// a wake's, bridges started on enqueue, and a tick's with no part this
// release knows (written by hand in tests and old fixtures) kept as it is.
func TestOldInputsRead(t *testing.T) {
	t.Parallel()
	wake := InputsFrom(map[string]int{"ready": 6, "workers": 2, "desired_before": 0, "desired_after": 3})
	if wake.Wake == nil || *wake.Wake != (WakeInputs{Ready: 6, Workers: 2}) || wake.Change == nil || *wake.Change != (DesiredChange{0, 3}) ||
		wake.Tick != nil || wake.Bridge != nil {
		t.Fatalf("wake read as %+v", wake)
	}
	bridge := InputsFrom(map[string]int{"ready": 5, "idle": 0, "free_slots": 2, "on_demand_desired": 2, "desired_before": 1, "desired_after": 3})
	if bridge.Bridge == nil || *bridge.Bridge != (BridgeStartInputs{Ready: 5, FreeSlots: 2, OnDemandDesired: 2}) || bridge.Ladder != nil || bridge.Tick != nil {
		t.Fatalf("bridge start read as %+v", bridge)
	}
	if want := NewBridgeStartInputs(5, 0, 2, 2).Changed(1, 3); !reflect.DeepEqual(bridge, want) {
		t.Fatalf("bridge start read as %+v, built as %+v", bridge, want)
	}
	partial := map[string]int{"ready": 3, "leased": 4}
	if got := InputsFrom(partial).Map(); !maps.Equal(got, partial) {
		t.Fatalf("partial inputs written back as %v, want %v", got, partial)
	}
}

// Counts under keys this release does not know (a later release's) are
// kept when the history is written again, so a rollback loses nothing.
func TestUnknownInputsSurviveARewrite(t *testing.T) {
	t.Parallel()
	later := map[string]int{"ready": 1, "workers": 0, "desired_before": 0, "desired_after": 1, "gpu_memory_free": 12}
	if got := InputsFrom(later).Map(); !maps.Equal(got, later) {
		t.Fatalf("written back as %v, want %v", got, later)
	}
	if (Inputs{}).Map() != nil || InputsFrom(nil).Map() != nil {
		t.Fatal("no inputs must write none")
	}
}

// A decision as JSON has the store's names (its record's): its reason's line and code,
// and its inputs' map.
func TestDecisionJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	d := Decision{At: at, Desired: 3, Reason: scaling.WakeReason(6), Inputs: NewWakeInputs(6, 0, 0, 3)}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"at":"2026-11-01T12:00:00Z","desired":3,"reason":"woken by 6 ready jobs","reason_code":"wake",` +
		`"inputs":{"desired_after":3,"desired_before":0,"ready":6,"workers":0},"in_service":0}`
	if string(b) != want {
		t.Fatalf("json %s\nwant %s", b, want)
	}
	if back := d.Record().Decision(); !reflect.DeepEqual(back, d) {
		t.Fatalf("record read back as %+v, want %+v", back, d)
	}
	old := Decision{At: at, Reason: scaling.RecordedReason("", "hold 0: no work")}
	if b, _ := json.Marshal(old); strings.Contains(string(b), "reason_code") {
		t.Fatalf("a reason without a code writes one: %s", b)
	}
}
