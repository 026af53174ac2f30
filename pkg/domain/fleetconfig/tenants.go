package fleetconfig

import (
	"fmt"

	"github.com/fleetq/fleetq/pkg/domain/tenant"
)

// Tenant holds one tenant's quotas and share across every fleet of the
// stage (docs/scaling.md, "Tenant quotas"). A tenant not listed takes the
// entry whose ID is "*", and without one has no caps and weight 1.
type Tenant struct {
	// ID is the tenant_id submissions carry (1-32 lowercase letters, digits
	// and hyphens, starting and ending with a letter or digit), or "*" for
	// every tenant not listed by name.
	ID string `yaml:"id"`
	// Principals are the IAM role or user ARNs (arn:aws:iam::ACCOUNT:role/NAME)
	// that act for this tenant on the producer routes; a session of an
	// assumed role is its role. A principal acts for one tenant only.
	// Changing them takes a deploy; fleetq tenants principals add maps
	// principals in the table instead, without one.
	Principals []string `yaml:"principals"`
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
	owners := map[string]string{} // principal key -> where it is listed
	for i, arn := range c.Operators {
		c.checkPrincipal(k, fmt.Sprintf("operators[%d]", i), arn, owners)
	}
	seen := map[string]int{}
	for i, t := range c.Tenants {
		at := fmt.Sprintf("tenants[%d]", i)
		switch {
		case t.ID == "":
			k.add(at+".id", "is required (a tenant_id, or \"*\" for every tenant not listed)")
		case t.ID != AnyTenant && !tenant.ValidID(t.ID):
			k.add(at+".id", "%q is not a tenant id: %s, or \"*\"", t.ID, tenant.IDRule)
		}
		if t.ID == AnyTenant && len(t.Principals) > 0 {
			k.add(at+".principals", "the \"*\" entry acts for no tenant; list principals under a tenant's own entry")
		}
		for j, arn := range t.Principals {
			c.checkPrincipal(k, fmt.Sprintf("%s.principals[%d]", at, j), arn, owners)
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

// checkPrincipal refuses an ARN that names no one role or user, or one
// already listed: a principal acts for one tenant, or as an operator.
func (c *Config) checkPrincipal(k *checker, at, arn string, owners map[string]string) {
	p, err := tenant.ParseConfigPrincipal(arn)
	if err != nil {
		k.add(at, "%v", err)
		return
	}
	if prev, dup := owners[p.Key()]; dup {
		k.add(at, "%q is already listed as %s; a principal acts for one tenant, or as an operator", arn, prev)
		return
	}
	owners[p.Key()] = at
}

// Caller is who an IAM principal is on the producer routes.
type Caller struct {
	// Tenant is the tenant it acts for ("" for an operator).
	Tenant string
	// Operator is true for a principal of Operators.
	Operator bool
}

// CallerFor says who the IAM caller with this ARN (as API Gateway's IAM
// authorizer reports it) is on the producer routes: one tenant's
// principal, an operator, or nobody (false).
func (c *Config) CallerFor(arn string) (Caller, bool) {
	p, err := tenant.ParseCaller(arn)
	if err != nil {
		return Caller{}, false
	}
	key := p.Key()
	for _, t := range c.Tenants {
		for _, listed := range t.Principals {
			if lp, err := tenant.ParseConfigPrincipal(listed); err == nil && lp.Key() == key {
				return Caller{Tenant: t.ID}, true
			}
		}
	}
	for _, listed := range c.Operators {
		if lp, err := tenant.ParseConfigPrincipal(listed); err == nil && lp.Key() == key {
			return Caller{Operator: true}, true
		}
	}
	return Caller{}, false
}
