package cost

import (
	"time"
)

// SpotPriceMaxAge is how old a fleet's Spot prices may be and still price
// a job: past it (the scaler could not read EC2's Spot price history for
// hours) a job falls back to the config's flat Spot price.
const SpotPriceMaxAge = 6 * time.Hour

// SpotPoint is one entry of EC2's Spot price history: the hourly price of
// an instance type in one availability zone from At on.
type SpotPoint struct {
	InstanceType string
	Zone         string
	USD          float64
	At           time.Time
}

// SpotPrices are a fleet's current Spot prices by instance type and zone,
// as read at ReadAt.
type SpotPrices struct {
	ReadAt time.Time
	// USD is the hourly price by SpotKey(type, zone).
	USD map[string]float64
}

// SpotKey names an instance type in a zone.
func SpotKey(instanceType, zone string) string { return instanceType + "/" + zone }

// LatestSpot keeps, of a price history, the latest price of each instance
// type and zone that took effect at or before at: the price in force.
// Entries without a type, a zone or a positive price are ignored.
func LatestSpot(history []SpotPoint, at time.Time) SpotPrices {
	out := SpotPrices{ReadAt: at, USD: map[string]float64{}}
	since := map[string]time.Time{}
	for _, p := range history {
		if p.InstanceType == "" || p.Zone == "" || p.USD <= 0 || p.At.After(at) {
			continue
		}
		k := SpotKey(p.InstanceType, p.Zone)
		if prev, ok := since[k]; ok && !p.At.After(prev) {
			continue
		}
		since[k], out.USD[k] = p.At, p.USD
	}
	return out
}

// Of answers the Spot price of an instance type in a zone for a job that
// ended at end, and false when there is none: no zone, no price for the
// pair, or prices older than SpotPriceMaxAge at end.
func (s SpotPrices) Of(instanceType, zone string, end time.Time) (float64, bool) {
	if zone == "" || s.ReadAt.IsZero() || end.Sub(s.ReadAt) > SpotPriceMaxAge {
		return 0, false
	}
	usd, ok := s.USD[SpotKey(instanceType, zone)]
	return usd, ok && usd > 0
}

// WithSpot is p with its Spot price replaced by the fleet's current Spot
// price of the instance type in its zone, when there is one; otherwise p's
// flat Spot price (the config's) stays.
func (p Price) WithSpot(s SpotPrices, instanceType, zone string, end time.Time) Price {
	if usd, ok := s.Of(instanceType, zone, end); ok {
		p.Spot = usd
	}
	return p
}
