package cost

import (
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

func TestChargeUSD(t *testing.T) {
	cases := []struct {
		name string
		c    Charge
		want float64
	}{
		{"one hour of a whole instance", Charge{PricePerHour: 1.006, Slots: 1, Leased: time.Hour}, 1.006},
		{"a slot pays its share", Charge{PricePerHour: 1.2, Slots: 4, Leased: time.Hour}, 0.3},
		{"overhead on top", Charge{PricePerHour: 1, Slots: 1, Leased: 30 * time.Minute, Overhead: 0.2}, 0.6},
		{"no slots means one", Charge{PricePerHour: 2, Leased: 90 * time.Minute}, 3},
		{"negative overhead is none", Charge{PricePerHour: 1, Slots: 1, Leased: time.Hour, Overhead: -1}, 1},
		{"never leased costs nothing", Charge{PricePerHour: 5, Slots: 1, Overhead: 0.5}, 0},
		{"rounded to a micro-dollar", Charge{PricePerHour: 0.45, Slots: 3, Leased: 7 * time.Second}, 0.000292},
	}
	for _, c := range cases {
		if got := c.c.USD(); got != c.want {
			t.Errorf("%s: USD = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPriceFor(t *testing.T) {
	p := Price{OnDemand: 1.006, Spot: 0.42}
	cases := []struct {
		price    Price
		purchase string
		want     float64
		ok       bool
	}{
		{p, Spot, 0.42, true},
		{p, OnDemand, 1.006, true},
		{Price{OnDemand: 1.006}, Spot, 0, false},
		{p, "reserved", 0, false},
	}
	for _, c := range cases {
		got, ok := c.price.For(c.purchase)
		if got != c.want || ok != c.ok {
			t.Errorf("%+v.For(%s) = %v, %v; want %v, %v", c.price, c.purchase, got, ok, c.want, c.ok)
		}
	}
}

func TestLeasedSumsAttempts(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	e := func(m int, from, to job.Status) job.HistoryEntry {
		return job.HistoryEntry{At: at(m), From: from, To: to}
	}
	cases := []struct {
		name string
		h    []job.HistoryEntry
		end  time.Time
		want time.Duration
	}{
		{"never leased", []job.HistoryEntry{e(0, "", job.Queued), e(5, job.Queued, job.Canceled)}, at(9), 0},
		{"one attempt", []job.HistoryEntry{e(0, "", job.Queued), e(2, job.Queued, job.Leased), e(12, job.Leased, job.Succeeded)}, at(20), 10 * time.Minute},
		{"a failure and a retry", []job.HistoryEntry{
			e(0, "", job.Queued), e(1, job.Queued, job.Leased), e(4, job.Leased, job.Queued),
			e(10, job.Queued, job.Leased), e(17, job.Leased, job.Dead)}, at(30), 10 * time.Minute},
		{"still leased counts to end", []job.HistoryEntry{e(0, "", job.Queued), e(1, job.Queued, job.Leased)}, at(6), 5 * time.Minute},
		{"canceled while leased", []job.HistoryEntry{e(0, "", job.Queued), e(1, job.Queued, job.Leased), e(3, job.Leased, job.Canceled)}, at(9), 2 * time.Minute},
	}
	for _, c := range cases {
		if got := Leased(c.h, c.end); got != c.want {
			t.Errorf("%s: Leased = %v, want %v", c.name, got, c.want)
		}
	}
}
