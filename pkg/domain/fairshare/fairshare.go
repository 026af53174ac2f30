package fairshare

import "time"

// Tenant is one tenant's standing at a lease: its weight, its cap on leased
// jobs, what it holds and what it has waiting.
type Tenant struct {
	ID string
	// Weight is its share relative to the others (0 counts as 1).
	Weight float64
	// MaxLeased caps its leased jobs (0: no cap).
	MaxLeased int
	// Leased and Ready are its jobs leased now and ready to lease.
	Leased, Ready int
	// OldestReady is when its oldest ready job was queued.
	OldestReady time.Time
}

func (t Tenant) weight() float64 {
	if t.Weight <= 0 {
		return 1
	}
	return t.Weight
}

// AtCap reports whether the tenant may lease no more now.
func (t Tenant) AtCap() bool { return t.MaxLeased > 0 && t.Leased >= t.MaxLeased }

// Pick returns the index of the tenant whose job the next free slot takes:
// among tenants with ready jobs and below their cap, the lowest leased jobs
// per unit of weight; ties go to the oldest ready job, then the lower ID.
// It returns -1 when no tenant may lease.
func Pick(ts []Tenant) int {
	best := -1
	for i, t := range ts {
		if t.Ready <= 0 || t.AtCap() {
			continue
		}
		if best < 0 || less(t, ts[best]) {
			best = i
		}
	}
	return best
}

func less(a, b Tenant) bool {
	sa, sb := float64(a.Leased)/a.weight(), float64(b.Leased)/b.weight()
	if sa != sb {
		return sa < sb
	}
	if !a.OldestReady.Equal(b.OldestReady) {
		return a.OldestReady.Before(b.OldestReady)
	}
	return a.ID < b.ID
}

// Demand is the work the caps let run: each tenant's ready and leased jobs,
// at most its cap. The scaler sizes capacity to it rather than to a capped
// tenant's whole backlog.
func Demand(ts []Tenant) int {
	n := 0
	for _, t := range ts {
		w := t.Ready + t.Leased
		if t.MaxLeased > 0 {
			w = min(w, t.MaxLeased)
		}
		n += w
	}
	return n
}
