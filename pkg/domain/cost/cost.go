package cost

import (
	"math"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// Purchase options of an instance.
const (
	Spot     = "spot"
	OnDemand = "on-demand"
)

// Price is what one instance-hour of a type costs, in dollars.
type Price struct {
	// OnDemand is the On-Demand price (from the stage's config).
	OnDemand float64
	// Spot is the Spot price recorded in the config, 0 when not known.
	Spot float64
}

// For answers the hourly price of the purchase option, and false when it
// is not known: a Spot instance without a recorded Spot price is charged
// nothing rather than a guess.
func (p Price) For(purchase string) (float64, bool) {
	switch purchase {
	case OnDemand:
		return p.OnDemand, p.OnDemand > 0
	case Spot:
		return p.Spot, p.Spot > 0
	}
	return 0, false
}

// Charge is what a job ran on and for how long.
type Charge struct {
	// PricePerHour is the instance's hourly price.
	PricePerHour float64
	// Slots is how many jobs the instance runs at once; a job pays for its
	// slot, 1/Slots of the instance.
	Slots int
	// Leased is the job's leased time, every attempt summed.
	Leased time.Duration
	// Overhead is the instance time spent booting and idle, as a fraction
	// of leased time; each job pays that share on top of its own time.
	Overhead float64
}

// USD is the job's cost in dollars, rounded to a micro-dollar:
// price × leased hours ÷ slots × (1 + overhead).
func (c Charge) USD() float64 {
	slots := c.Slots
	if slots < 1 {
		slots = 1
	}
	overhead := c.Overhead
	if overhead < 0 {
		overhead = 0
	}
	usd := c.PricePerHour * c.Leased.Hours() / float64(slots) * (1 + overhead)
	return math.Round(usd*1e6) / 1e6
}

// Leased sums the time a job spent leased, from its history: each
// transition into leased opens an attempt and the next transition out of
// leased closes it; an attempt still open is counted up to end. History is
// bounded (job.HistoryLimit), so a job with more transitions than that is
// charged for the attempts its history still holds.
func Leased(history []job.HistoryEntry, end time.Time) time.Duration {
	var total time.Duration
	var since time.Time
	open := false
	for _, h := range history {
		if open && h.From == job.Leased {
			if d := h.At.Sub(since); d > 0 {
				total += d
			}
			open = false
		}
		if h.To == job.Leased {
			since, open = h.At, true
		}
	}
	if open && end.After(since) {
		total += end.Sub(since)
	}
	return total
}

// Group is the cost of the jobs of one tenant, fleet and workflow that
// finished in a window.
type Group struct {
	Tenant, Fleet, Workflow string
	// Jobs finished; Unpriced of them have no cost (no price known for
	// their instance, or no worker record).
	Jobs, Unpriced int
	USD            float64
}
