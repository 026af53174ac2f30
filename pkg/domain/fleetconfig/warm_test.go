package fleetconfig

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWarmWindowActive(t *testing.T) {
	thu := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // a Thursday
	cases := []struct {
		name string
		w    WarmWindow
		at   time.Time
		want bool
	}{
		{"inside", WarmWindow{From: "08:00", To: "22:00"}, thu.Add(9 * time.Hour), true},
		{"at from", WarmWindow{From: "08:00", To: "22:00"}, thu.Add(8 * time.Hour), true},
		{"at to (end is exclusive)", WarmWindow{From: "08:00", To: "22:00"}, thu.Add(22 * time.Hour), false},
		{"before", WarmWindow{From: "08:00", To: "22:00"}, thu.Add(7*time.Hour + 59*time.Minute), false},
		{"wraps midnight, late", WarmWindow{From: "22:00", To: "06:00"}, thu.Add(23 * time.Hour), true},
		{"wraps midnight, early", WarmWindow{From: "22:00", To: "06:00"}, thu.Add(5 * time.Hour), true},
		{"wraps midnight, day", WarmWindow{From: "22:00", To: "06:00"}, thu.Add(12 * time.Hour), false},
		{"whole day", WarmWindow{From: "00:00", To: "00:00"}, thu.Add(13 * time.Hour), true},
		{"listed day", WarmWindow{Days: []string{"thu"}, From: "08:00", To: "22:00"}, thu.Add(9 * time.Hour), true},
		{"other day", WarmWindow{Days: []string{"mon", "fri"}, From: "08:00", To: "22:00"}, thu.Add(9 * time.Hour), false},
		{"UTC whatever the zone of t", WarmWindow{From: "08:00", To: "09:00"}, thu.Add(8*time.Hour + 30*time.Minute).In(time.FixedZone("X", 5*3600)), true},
	}
	for _, c := range cases {
		if got := c.w.Active(c.at); got != c.want {
			t.Errorf("%s: Active(%s) = %v, want %v", c.name, c.at.Format(time.RFC3339), got, c.want)
		}
	}
}

func TestParseWarmWindow(t *testing.T) {
	w, err := ParseWarmWindow("08:00-22:00,min=2,spare=1,days=mon+tue")
	if err != nil {
		t.Fatal(err)
	}
	if w.From != "08:00" || w.To != "22:00" || w.MinInstances != 2 || w.SpareInstances != 1 || strings.Join(w.Days, ",") != "mon,tue" {
		t.Fatalf("parsed %+v", w)
	}
	for _, bad := range []string{"", "8-22", "08:00-22:00", "08:00-22:00,min=x", "08:00-22:00,spare=-1", "08:00-22:00,colour=1", "25:00-26:00,min=1", "08:00-22:00,min=1,days=someday"} {
		if _, err := ParseWarmWindow(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestWarmWindowsInConfig(t *testing.T) {
	doc := minimal + "    max_instances: 8\n    warm:\n      - days: [mon, tue, wed, thu, fri]\n        from: \"08:00\"\n        to: \"20:00\"\n        min_instances: 2\n        spare_instances: 1\n"
	cfg, err := Parse("w.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Fleets[0].Warm; len(w) != 1 || w[0].MinInstances != 2 || w[0].SpareInstances != 1 || len(w[0].Days) != 5 {
		t.Fatalf("warm = %+v", w)
	}
	bad := []struct{ doc, want string }{
		{minimal + "    warm:\n      - from: \"8am\"\n        to: \"20:00\"\n        min_instances: 1\n", `fleets[0].warm[0].from: "8am" is not a UTC time of day (HH:MM)`},
		{minimal + "    warm:\n      - from: \"08:00\"\n        to: \"20:00\"\n", "fleets[0].warm[0]: sets neither min_instances nor spare_instances"},
		{minimal + "    max_instances: 4\n    warm:\n      - from: \"08:00\"\n        to: \"20:00\"\n        min_instances: 5\n", "fleets[0].warm[0].min_instances: must be between 0 and max_instances (4), got 5"},
		{minimal + "    warm:\n      - days: [someday]\n        from: \"08:00\"\n        to: \"20:00\"\n        min_instances: 1\n", `fleets[0].warm[0].days[0]: "someday" is not a day (mon, tue, wed, thu, fri, sat, sun)`},
	}
	for _, b := range bad {
		_, err := Parse("bad.yaml", []byte(b.doc))
		var verr *ValidationError
		if !errors.As(err, &verr) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("error %v\ndoes not contain %s", err, b.want)
		}
	}
}

func TestOnDemandRungInConfig(t *testing.T) {
	cfg, err := Parse("o.yaml", []byte(minimal+"    on_demand:\n      fallback_after: 10m\n      price_per_hour: 1.006\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.Fleets[0].OnDemand; !o.Enabled() || o.FallbackAfter.Std() != 10*time.Minute || o.PricePerHour != 1.006 {
		t.Fatalf("on_demand = %+v", o)
	}
	if cfg, _ := Parse("m.yaml", []byte(minimal)); cfg.Fleets[0].OnDemand.Enabled() {
		t.Fatal("a fleet without on_demand has an On-Demand rung")
	}
	_, err = Parse("bad.yaml", []byte(minimal+"    on_demand:\n      fallback_after: 48h\n"))
	if err == nil || !strings.Contains(err.Error(), "fleets[0].on_demand.fallback_after: must be between 0s (no On-Demand rung) and 24h, got 48h0m0s") {
		t.Fatalf("error %v", err)
	}
}

func TestForecastAndOnDemandWarmPoolInConfig(t *testing.T) {
	doc := minimal + "    max_instances: 8\n    forecast:\n      enabled: true\n      budget_gpu_hours_per_day: 12.5\n      lookback_days: 14\n    on_demand:\n      fallback_after: 10m\n      warm_pool:\n        size: 2\n        state: hibernated\n"
	cfg, err := Parse("f.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	f := cfg.Fleets[0]
	if fc := f.Forecast; !fc.Enabled || fc.Budget() != 12*time.Hour+30*time.Minute || fc.Lookback() != 14 || fc.LeadTime() != DefaultForecastLead {
		t.Fatalf("forecast = %+v", fc)
	}
	if wp := f.OnDemand.WarmPool; wp.Size != 2 || wp.PoolState() != WarmPoolHibernated {
		t.Fatalf("warm pool = %+v", wp)
	}
	bad := []struct{ doc, want string }{
		{minimal + "    forecast:\n      enabled: true\n", "fleets[0].forecast.budget_gpu_hours_per_day: is required when the forecast is enabled"},
		{minimal + "    forecast:\n      lookback_days: 60\n", "fleets[0].forecast.lookback_days: must be between 1 and 28"},
		{minimal + "    forecast:\n      lead: 2h\n", "fleets[0].forecast.lead: must be between 0s"},
		{minimal + "    on_demand:\n      warm_pool:\n        size: 1\n", "fleets[0].on_demand.warm_pool: needs the On-Demand rung"},
		{minimal + "    on_demand:\n      fallback_after: 5m\n      warm_pool:\n        size: 1\n        state: running\n", `fleets[0].on_demand.warm_pool.state: must be stopped or hibernated, got "running"`},
	}
	for _, b := range bad {
		_, err := Parse("bad.yaml", []byte(b.doc))
		var verr *ValidationError
		if !errors.As(err, &verr) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("error %v\ndoes not contain %s", err, b.want)
		}
	}
}
