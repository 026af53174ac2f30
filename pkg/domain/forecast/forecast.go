// Package forecast turns a fleet's own history of demand into capacity to
// hold warm ahead of it: per UTC hour it keeps how many jobs arrived and
// how much work (ready + leased jobs) the scaler saw, and for the hour ahead
// it expects what the same hour brought on the last days. The warm GPU-time
// it may spend is capped by a daily budget (docs/scaling.md, "Forecast").
package forecast

import (
	"fmt"
	"math"
	"time"
)

// Hour is what one UTC hour of a fleet brought.
type Hour struct {
	// Arrivals are the jobs that arrived in the hour.
	Arrivals int `dynamodbav:"a" json:"arrivals"`
	// Work is the sum over the hour's scaler ticks of ready + leased jobs;
	// Ticks is how many ticks saw the hour (Work / Ticks is the mean work).
	Work  int `dynamodbav:"w" json:"work"`
	Ticks int `dynamodbav:"n" json:"ticks"`
}

// History is a fleet's hours, keyed by HourOf.
type History map[int64]Hour

// HourOf is the key of the UTC hour holding t (hours since the Unix epoch).
func HourOf(t time.Time) int64 { return int64(math.Floor(float64(t.Unix()) / 3600)) }

// Observe adds one tick's sample at now: the jobs that arrived since the
// previous tick and the work seen now. It answers h (a new map when h is
// nil).
func (h History) Observe(now time.Time, arrivals, work int) History {
	if h == nil {
		h = History{}
	}
	k := HourOf(now)
	x := h[k]
	x.Arrivals += max(0, arrivals)
	x.Work += max(0, work)
	x.Ticks++
	h[k] = x
	return h
}

// Prune drops the hours older than lookbackDays before now (they can no
// longer be a "same hour" of a day looked back on).
func (h History) Prune(now time.Time, lookbackDays int) {
	oldest := HourOf(now) - int64(lookbackDays)*24
	for k := range h {
		if k < oldest {
			delete(h, k)
		}
	}
}

// Expectation is what the hour ahead is expected to bring: the mean of the
// same UTC hour over the days looked back on that have it.
type Expectation struct {
	// Arrivals is jobs expected in the hour; Work is the mean number of
	// ready + leased jobs (concurrent work) expected in it.
	Arrivals, Work float64
	// Days is how many days of history the figures come from (0: none, no
	// forecast).
	Days int
}

// Expect is the expectation for the UTC hour holding at, from the same hour
// of each of the lookbackDays days before it that has a sample.
func Expect(h History, at time.Time, lookbackDays int) Expectation {
	var e Expectation
	k := HourOf(at)
	for d := 1; d <= lookbackDays; d++ {
		x, ok := h[k-int64(d)*24]
		if !ok || x.Ticks == 0 {
			continue
		}
		e.Days++
		e.Arrivals += float64(x.Arrivals)
		e.Work += float64(x.Work) / float64(x.Ticks)
	}
	if e.Days > 0 {
		e.Arrivals /= float64(e.Days)
		e.Work /= float64(e.Days)
	}
	return e
}

// Slots is the job slots to hold for the expectation when work jobs are
// ready or leased now: the larger of the expected and the present work,
// plus the jobs expected to arrive within lead (the time a new instance
// takes to boot: those would wait for it).
func (e Expectation) Slots(work int, lead time.Duration) float64 {
	if e.Days == 0 {
		return 0
	}
	return math.Max(e.Work, float64(work)) + e.Arrivals*lead.Hours()
}

// Instances is the instances that hold Slots, rounded up.
func (e Expectation) Instances(work int, lead time.Duration, slotsPerInstance int) int {
	s := e.Slots(work, lead)
	if s <= 0 {
		return 0
	}
	return int(math.Ceil(s/float64(max(1, slotsPerInstance)) - 1e-9))
}

// String describes the expectation for a decision's reason.
func (e Expectation) String() string {
	return fmt.Sprintf("%.1f jobs/h and %.1f concurrent expected (%d days)", e.Arrivals, e.Work, e.Days)
}

// Budget is the warm time the forecast spent on one UTC day.
type Budget struct {
	// Day is the UTC day, YYYY-MM-DD.
	Day string `dynamodbav:"day" json:"day"`
	// Spent is instance-time held by the forecast beyond what the policy
	// wanted without it.
	Spent time.Duration `dynamodbav:"spent_ns" json:"spent"`
}

func dayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// On is the budget on now's day: a budget of an earlier day starts over.
func (b Budget) On(now time.Time) Budget {
	if d := dayOf(now); b.Day != d {
		return Budget{Day: d}
	}
	return b
}

// Left is what remains of perDay on now's day.
func (b Budget) Left(now time.Time, perDay time.Duration) time.Duration {
	return max(0, perDay-b.On(now).Spent)
}

// Spend books extra instances held for d at now.
func (b Budget) Spend(now time.Time, extra int, d time.Duration) Budget {
	b = b.On(now)
	if extra > 0 && d > 0 {
		b.Spent += time.Duration(extra) * d
	}
	return b
}

// Cap is how many instances beyond what the policy wants anyway the
// forecast may hold with left of its budget: as many as left pays for over
// the next hour, and at least one while anything is left (so the last
// minutes of a budget are spent, at most one tick over).
func Cap(left time.Duration) int {
	if left <= 0 {
		return 0
	}
	return max(1, int(left/time.Hour))
}
