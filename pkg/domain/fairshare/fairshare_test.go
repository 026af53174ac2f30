package fairshare

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func TestPick(t *testing.T) {
	cases := []struct {
		name string
		ts   []Tenant
		want string
	}{
		{"lowest leased share first, not oldest job", []Tenant{
			{ID: "burst", Leased: 8, Ready: 100, OldestReady: t0.Add(-time.Hour)},
			{ID: "small", Leased: 1, Ready: 1, OldestReady: t0},
		}, "small"},
		{"weight doubles the share", []Tenant{
			{ID: "a", Weight: 2, Leased: 3, Ready: 5, OldestReady: t0},
			{ID: "b", Weight: 1, Leased: 2, Ready: 5, OldestReady: t0.Add(-time.Hour)},
		}, "a"},
		{"equal shares: oldest ready job", []Tenant{
			{ID: "a", Leased: 2, Ready: 1, OldestReady: t0},
			{ID: "b", Leased: 2, Ready: 1, OldestReady: t0.Add(-time.Minute)},
		}, "b"},
		{"equal in everything: by id", []Tenant{
			{ID: "b", Ready: 1, OldestReady: t0},
			{ID: "a", Ready: 1, OldestReady: t0},
		}, "a"},
		{"a tenant at its cap waits", []Tenant{
			{ID: "capped", MaxLeased: 2, Leased: 2, Ready: 9, OldestReady: t0.Add(-time.Hour)},
			{ID: "other", Leased: 5, Ready: 1, OldestReady: t0},
		}, "other"},
		{"no ready work, nobody", []Tenant{{ID: "a", Leased: 3}}, ""},
		{"everyone capped, nobody", []Tenant{{ID: "a", MaxLeased: 1, Leased: 1, Ready: 4}}, ""},
	}
	for _, c := range cases {
		got := ""
		if i := Pick(c.ts); i >= 0 {
			got = c.ts[i].ID
		}
		if got != c.want {
			t.Errorf("%s: picked %q, want %q", c.name, got, c.want)
		}
	}
}

func TestWeightedSharesOverManyLeases(t *testing.T) {
	ts := []Tenant{{ID: "a", Weight: 3, Ready: 1000}, {ID: "b", Weight: 1, Ready: 1000}}
	for range 40 {
		i := Pick(ts)
		ts[i].Leased++
		ts[i].Ready--
	}
	if ts[0].Leased != 30 || ts[1].Leased != 10 {
		t.Fatalf("leased a=%d b=%d, want 30 and 10 (weights 3:1)", ts[0].Leased, ts[1].Leased)
	}
}

func TestDemandStopsAtTheCaps(t *testing.T) {
	ts := []Tenant{{ID: "capped", MaxLeased: 4, Leased: 4, Ready: 200}, {ID: "free", Leased: 2, Ready: 3}}
	if got := Demand(ts); got != 4+5 {
		t.Fatalf("demand %d, want 9: the capped tenant's 204 jobs count as its cap of 4", got)
	}
}
