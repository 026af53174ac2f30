package cost

import "time"

// GP3PricePerGBMonth is gp3's price in us-east-1, dollars per GB-month, as
// AWS's EBS pricing page lists it: what a stopped instance's root volume
// costs (docs/scaling.md, "Cost per job").
const GP3PricePerGBMonth = 0.08

// HoursPerMonth is AWS's month for prorating monthly prices.
const HoursPerMonth = 730

// Volumes is what n volumes of gb GB each cost over d at pricePerGBMonth
// dollars a GB-month, unrounded: a stopped pool bills its volumes every
// hour, used or not.
func Volumes(n, gb int, pricePerGBMonth float64, d time.Duration) float64 {
	if n <= 0 || gb <= 0 || d <= 0 {
		return 0
	}
	return float64(n*gb) * pricePerGBMonth * d.Hours() / HoursPerMonth
}
