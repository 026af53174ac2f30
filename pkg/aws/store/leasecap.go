package store

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// Leased caps (docs/scaling.md, "Caps"). A tenant with a max_leased cap has
// a counter item of its leased jobs, stage-wide. A claim of one of its jobs
// takes a slot in it, in the claim's own transaction and only while the
// count is below the cap, so concurrent pollers can never lease past it.
// The lease token of such a claim starts with slotTokenPrefix: it says the
// lease holds a slot, and every way the lease ends (complete, fail,
// requeue, cancel, expiry, run timeout, interruption or deregistration,
// the poll's own undo) gives the slot back in the transaction that ends
// it (jobUpdate adds the release). Jobs of tenants without a cap take no
// slot and write nothing more; a cap set or removed while leases run
// changes nothing for them, since each lease carries whether it holds a
// slot. docs/data-model.md, "Tenant counters", has the item.

// slotTokenPrefix starts the lease token of a lease that holds a slot of
// its tenant's leased counter. Other tokens are plain hex, which never
// holds the '.'.
const slotTokenPrefix = "s."

// holdsLeaseSlot reports whether a lease under token holds a slot of its
// tenant's leased counter.
func holdsLeaseSlot(token string) bool { return strings.HasPrefix(token, slotTokenPrefix) }

// leaseCaps reports whether any tenant of the stage has a max_leased cap.
func (s *Store) leaseCaps() bool {
	if s.cfg == nil {
		return false
	}
	for _, t := range s.cfg.Tenants {
		if t.MaxLeased > 0 {
			return true
		}
	}
	return false
}

// leasedCount is the change of a tenant's leased jobs by delta.
func leasedCount(tenant string, delta int, now time.Time) *update {
	pk, sk := tenantLeasedKey(tenant)
	n := expression.Name(attrLeasedJobs)
	return &update{pk: pk, sk: sk,
		set: expression.Set(n, expression.Plus(expression.IfNotExists(n, expression.Value(0)), expression.Value(delta))).
			Set(expression.Name(attrChangedMS), expression.Value(ms(now))),
	}
}

// takeLeaseSlot is the claim's member that counts the lease in its
// tenant's leased jobs, while they are below limit.
func takeLeaseSlot(tenant string, limit int, now time.Time) *update {
	u := leasedCount(tenant, 1, now)
	n := expression.Name(attrLeasedJobs)
	u.cond = expression.Or(expression.AttributeNotExists(n), n.LessThan(expression.Value(limit)))
	return u
}

// leaseSlotRelease is the counter change that ends a lease of it (as read,
// leased under its token): one leased job fewer for its tenant when the
// lease holds a slot, nil otherwise.
func leaseSlotRelease(it *jobItem, now time.Time) *update {
	if it.Status != string(job.Leased) || !holdsLeaseSlot(it.LeaseToken) || it.TenantID == "" {
		return nil
	}
	return leasedCount(it.TenantID, -1, now)
}

// TenantLeasedJobs reads a tenant's count of leased jobs holding a slot (0
// for a tenant never counted).
func (s *Store) TenantLeasedJobs(ctx context.Context, tenant string) (int, error) {
	pk, sk := tenantLeasedKey(tenant)
	var it leasedCounterItem
	if _, err := s.getItem(ctx, pk, sk, &it); err != nil {
		return 0, err
	}
	return it.Leased, nil
}

type leasedCounterItem struct {
	PK        string `dynamodbav:"PK"`
	SK        string `dynamodbav:"SK"`
	Leased    int    `dynamodbav:"leased"`
	ChangedMS int64  `dynamodbav:"changed_ms"`
}
