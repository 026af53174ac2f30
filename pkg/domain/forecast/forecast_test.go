package forecast

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 8, 14, 30, 0, 0, time.UTC)

func TestExpectAveragesTheSameHourOfEarlierDays(t *testing.T) {
	var h History
	// Three days before, at 14:xx: 10, 20 and (one day with two ticks) 30
	// arrivals; work means 4, 6 and (2+6)/2 = 4.
	h = h.Observe(t0.Add(-24*time.Hour), 10, 4)
	h = h.Observe(t0.Add(-48*time.Hour), 20, 6)
	h = h.Observe(t0.Add(-72*time.Hour).Add(-20*time.Minute), 25, 2)
	h = h.Observe(t0.Add(-72*time.Hour).Add(10*time.Minute), 5, 6)
	// Other hours and a day beyond the lookback do not count.
	h = h.Observe(t0.Add(-23*time.Hour), 1000, 1000)
	h = h.Observe(t0.Add(-96*time.Hour), 1000, 1000)
	for _, c := range []struct {
		name     string
		at       time.Time
		lookback int
		want     Expectation
	}{
		{"three days", t0, 3, Expectation{Arrivals: 20, Work: 14.0 / 3, Days: 3}},
		{"one day", t0, 1, Expectation{Arrivals: 10, Work: 4, Days: 1}},
		{"days without a sample are left out", t0.Add(24 * time.Hour), 3, Expectation{Arrivals: 15, Work: 5, Days: 2}},
		{"no history", t0.Add(2 * time.Hour), 7, Expectation{}},
		{"today does not count", t0.Add(-24 * time.Hour), 0, Expectation{}},
	} {
		got := Expect(h, c.at, c.lookback)
		if got.Days != c.want.Days || math.Abs(got.Arrivals-c.want.Arrivals) > 1e-9 || math.Abs(got.Work-c.want.Work) > 1e-9 {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestInstancesHoldTheExpectedWorkAndABootOfArrivals(t *testing.T) {
	for _, c := range []struct {
		name  string
		e     Expectation
		work  int
		lead  time.Duration
		slots int
		want  int
	}{
		{"no history, no forecast", Expectation{}, 5, 5 * time.Minute, 1, 0},
		{"expected work and 60/h over 5m", Expectation{Arrivals: 60, Work: 10, Days: 7}, 0, 5 * time.Minute, 1, 15},
		{"present work above the expectation", Expectation{Arrivals: 60, Work: 10, Days: 7}, 20, 5 * time.Minute, 1, 25},
		{"two slots per instance round up", Expectation{Arrivals: 12, Work: 2, Days: 7}, 0, 5 * time.Minute, 2, 2},
		{"an idle hour", Expectation{Days: 7}, 0, 5 * time.Minute, 1, 0},
		{"a fraction asks for one", Expectation{Arrivals: 1, Days: 2}, 0, 5 * time.Minute, 1, 1},
	} {
		if got := c.e.Instances(c.work, c.lead, c.slots); got != c.want {
			t.Errorf("%s: %d instances, want %d", c.name, got, c.want)
		}
	}
}

func TestBudgetIsSpentOverTheDayAndStartsOverAtMidnight(t *testing.T) {
	perDay := 3 * time.Hour
	var b Budget
	for _, c := range []struct {
		name     string
		at       time.Time
		extra    int
		d        time.Duration
		wantLeft time.Duration
		wantCap  int
	}{
		{"fresh", t0, 0, 0, 3 * time.Hour, 3},
		{"two instances for an hour", t0, 2, time.Hour, time.Hour, 1},
		{"most of the rest", t0.Add(time.Hour), 1, 50 * time.Minute, 10 * time.Minute, 1},
		{"spent", t0.Add(2 * time.Hour), 1, 20 * time.Minute, 0, 0},
		{"next UTC day", time.Date(2026, 1, 9, 0, 0, 0, 0, time.UTC), 0, 0, 3 * time.Hour, 3},
	} {
		b = b.Spend(c.at, c.extra, c.d)
		if left := b.Left(c.at, perDay); left != c.wantLeft || Cap(left) != c.wantCap {
			t.Errorf("%s: left %s cap %d, want %s cap %d", c.name, left, Cap(left), c.wantLeft, c.wantCap)
		}
	}
}

func TestPruneKeepsTheLookback(t *testing.T) {
	var h History
	h = h.Observe(t0, 1, 1)
	h = h.Observe(t0.Add(-7*24*time.Hour), 1, 1)
	h = h.Observe(t0.Add(-8*24*time.Hour), 1, 1)
	h.Prune(t0, 7)
	if len(h) != 2 || h[HourOf(t0.Add(-8*24*time.Hour))].Ticks != 0 {
		t.Errorf("after prune: %v", h)
	}
}
