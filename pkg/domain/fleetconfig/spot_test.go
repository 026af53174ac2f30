package fleetconfig

import (
	"strings"
	"testing"
	"time"
)

func TestSpotWeightingAndWaitSLOInConfig(t *testing.T) {
	cfg, err := Parse("m.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Fleets[0].Spot; s.InterruptionWindow.Std() != time.Hour || s.ZoneInterruptions != 3 {
		t.Fatalf("spot defaults = %+v", s)
	}
	if cfg.Fleets[0].OnDemand.WaitSLO != 0 {
		t.Fatalf("wait_slo default = %s, want none", cfg.Fleets[0].OnDemand.WaitSLO)
	}
	cfg, err = Parse("s.yaml", []byte(minimal+"    spot:\n      interruption_window: 30m\n      zone_interruptions: 5\n    on_demand:\n      fallback_after: 10m\n      wait_slo: 5m\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := cfg.Fleets[0]
	if f.Spot.InterruptionWindow.Std() != 30*time.Minute || f.Spot.ZoneInterruptions != 5 || f.OnDemand.WaitSLO.Std() != 5*time.Minute {
		t.Fatalf("spot %+v on_demand %+v", f.Spot, f.OnDemand)
	}
	for doc, want := range map[string]string{
		minimal + "    spot:\n      interruption_window: 10s\n":                      "fleets[0].spot.interruption_window: must be between 1m and 24h, got 10s",
		minimal + "    spot:\n      zone_interruptions: -1\n":                        "fleets[0].spot.zone_interruptions",
		minimal + "    on_demand:\n      wait_slo: 5m\n":                             "fleets[0].on_demand.wait_slo: needs on_demand.fallback_after",
		minimal + "    on_demand:\n      fallback_after: 10m\n      wait_slo: -1m\n": "fleets[0].on_demand.wait_slo: must be between 0s (none) and 24h",
	} {
		if _, err := Parse("bad.yaml", []byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\ndoes not contain %s", err, want)
		}
	}
}
