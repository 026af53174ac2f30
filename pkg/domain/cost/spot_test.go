package cost

import (
	"testing"
	"time"
)

func TestLatestSpotKeepsThePriceInForcePerTypeAndZone(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
	got := LatestSpot([]SpotPoint{
		{"g5.xlarge", "us-east-1a", 0.40, ago(90)},
		{"g5.xlarge", "us-east-1a", 0.45, ago(30)}, // newer: in force
		{"g5.xlarge", "us-east-1a", 0.38, ago(60)}, // older than 0.45, listed after it
		{"g5.xlarge", "us-east-1b", 0.52, ago(10)},
		{"g5.xlarge", "us-east-1c", 0.60, now.Add(time.Minute)}, // not yet in force
		{"g5.xlarge", "", 0.10, ago(5)},                         // no zone
		{"g6.xlarge", "us-east-1a", 0, ago(5)},                  // no price
	}, now)
	want := map[string]float64{"g5.xlarge/us-east-1a": 0.45, "g5.xlarge/us-east-1b": 0.52}
	if len(got.USD) != len(want) || !got.ReadAt.Equal(now) {
		t.Fatalf("LatestSpot = %+v, want %v read at %v", got, want, now)
	}
	for k, v := range want {
		if got.USD[k] != v {
			t.Errorf("%s = %v, want %v", k, got.USD[k], v)
		}
	}
}

func TestWithSpotPrefersTheZonesPriceWhileFresh(t *testing.T) {
	read := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	s := SpotPrices{ReadAt: read, USD: map[string]float64{SpotKey("g5.xlarge", "us-east-1a"): 0.45}}
	flat := Price{OnDemand: 1.006, Spot: 0.42}
	cases := []struct {
		name       string
		typ, zone  string
		end        time.Time
		spot, onDm float64
	}{
		{"the zone's price", "g5.xlarge", "us-east-1a", read.Add(time.Hour), 0.45, 1.006},
		{"another zone keeps the flat price", "g5.xlarge", "us-east-1b", read, 0.42, 1.006},
		{"no zone reported", "g5.xlarge", "", read, 0.42, 1.006},
		{"another type", "g6.xlarge", "us-east-1a", read, 0.42, 1.006},
		{"prices too old", "g5.xlarge", "us-east-1a", read.Add(SpotPriceMaxAge + time.Second), 0.42, 1.006},
		{"just fresh enough", "g5.xlarge", "us-east-1a", read.Add(SpotPriceMaxAge), 0.45, 1.006},
	}
	for _, c := range cases {
		got := flat.WithSpot(s, c.typ, c.zone, c.end)
		if got.Spot != c.spot || got.OnDemand != c.onDm {
			t.Errorf("%s: %+v, want spot %v on-demand %v", c.name, got, c.spot, c.onDm)
		}
	}
	if p := (Price{OnDemand: 1}).WithSpot(SpotPrices{}, "g5.xlarge", "us-east-1a", read); p.Spot != 0 {
		t.Errorf("no prices read: spot %v, want 0", p.Spot)
	}
}
