package fleetconfig

import (
	"fmt"
	"regexp"
)

// Tenant holds one tenant's quotas and share across every fleet of the
// stage (docs/scaling.md, "Tenant quotas"). A tenant not listed takes the
// entry whose ID is "*", and without one has no caps and weight 1.
type Tenant struct {
	// ID is the tenant_id submissions carry, or "*" for every tenant not
	// listed by name.
	ID string `yaml:"id"`
	// MaxQueued caps the tenant's open jobs: accepted and not yet finished
	// (waiting, backing off or running). A submission past it answers 429
	// and queues nothing. Zero: no cap.
	MaxQueued int `yaml:"max_queued"`
	// MaxLeased caps how many of the tenant's jobs run at once, stage-wide:
	// a hard cap on the lease path (no job of the tenant is leased while it
	// is at it), and the scaler sizes capacity to at most this many of its
	// jobs (docs/scaling.md, "Caps"). Zero: no cap.
	MaxLeased int `yaml:"max_leased"`
	// Weight is the tenant's share of free slots relative to the others in
	// the fair-share rule. Zero means 1.
	Weight float64 `yaml:"weight"`
}

// AnyTenant is the Tenant ID that applies to every tenant not listed.
const AnyTenant = "*"

// Limits of tenant settings.
const (
	MaxTenantCap    = 1_000_000
	MaxTenantWeight = 1000
)

var tenantPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// Tenant returns the settings that apply to a tenant: its own entry, else
// the "*" entry, else none (no caps, weight 1).
func (c *Config) Tenant(id string) Tenant {
	var fallback Tenant
	found := false
	for _, t := range c.Tenants {
		if t.ID == id {
			return t
		}
		if t.ID == AnyTenant {
			fallback, found = t, true
		}
	}
	if found {
		fallback.ID = id
		return fallback
	}
	return Tenant{ID: id}
}

func (c *Config) validateTenants(k *checker) {
	seen := map[string]int{}
	for i, t := range c.Tenants {
		at := fmt.Sprintf("tenants[%d]", i)
		switch {
		case t.ID == "":
			k.add(at+".id", "is required (a tenant_id, or \"*\" for every tenant not listed)")
		case t.ID != AnyTenant && !tenantPattern.MatchString(t.ID):
			k.add(at+".id", "%q must be 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit, or \"*\"", t.ID)
		}
		if prev, dup := seen[t.ID]; dup && t.ID != "" {
			k.add(at+".id", "%q is already listed as tenants[%d]", t.ID, prev)
		}
		seen[t.ID] = i
		k.rangeInt(at+".max_queued", t.MaxQueued, 0, MaxTenantCap)
		k.rangeInt(at+".max_leased", t.MaxLeased, 0, MaxTenantCap)
		if t.Weight < 0 || t.Weight > MaxTenantWeight {
			k.add(at+".weight", "must be between 0 (meaning 1) and %d, got %g", MaxTenantWeight, t.Weight)
		}
	}
}
