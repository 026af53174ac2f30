package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// Tenant quotas. A tenant with a max_queued cap has a counter item of its
// open jobs (accepted and not finished). A submission takes a slot in it
// before it is queued, atomically with its accepted job record (AcceptJob)
// and only while the count is below the cap; the job keeps the slot when
// the dispatch function files it (the job carries tenant_slot), and the
// outbox relay gives the slot back, once, when it removes the job's
// outcome event. Releases before accepted records wrote a reservation item
// instead, which the dispatch function still takes over (createCounted).
// docs/data-model.md, "Tenant counters", has the whole life of a slot.

// reservationRetention outlives any submission queue message (SQS keeps
// them at most 14 days); TTL only removes an accepted record (or an older
// release's reservation) whose job was never filed.
const reservationRetention = 15 * 24 * time.Hour

type tenantItem struct {
	PK   string `dynamodbav:"PK"`
	SK   string `dynamodbav:"SK"`
	Open int    `dynamodbav:"open"`
}

// tenantCount is the change of a tenant's open jobs by delta.
func tenantCount(tenant string, delta int) *update {
	pk, sk := tenantKey(tenant)
	open := expression.Name(attrOpen)
	return &update{pk: pk, sk: sk, set: expression.Set(open, expression.Plus(expression.IfNotExists(open, expression.Value(0)), expression.Value(delta)))}
}

// TenantOpenJobs reads a tenant's count of open jobs (0 for a tenant never
// counted).
func (s *Store) TenantOpenJobs(ctx context.Context, tenant string) (int, error) {
	pk, sk := tenantKey(tenant)
	var it tenantItem
	if _, err := s.getItem(ctx, pk, sk, &it); err != nil {
		return 0, err
	}
	return it.Open, nil
}

// countsForTenant reports whether a new job of the tenant is counted in its
// open jobs: when its config has a max_queued cap.
func (s *Store) countsForTenant(tenant string) bool {
	return s.cfg.Tenant(tenant).MaxQueued > 0
}

// createCounted creates a job of a capped tenant that was queued without
// an accepted record: it takes over the slot of the submission's
// reservation, which a release before accepted records wrote under the
// job's key alone (tenant.KeyOf, before tenant-scoped ids) or its full id,
// or without one (a submission sent straight to the queue, or accepted
// before the cap was set) takes a slot itself, past the cap: the job is
// already accepted. created is false for a repeat, which changes nothing;
// errLegacyJob when the tenant's job exists under its key alone.
func (s *Store) createCounted(ctx context.Context, it *jobItem, legacy string) (created bool, err error) {
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return false, fmt.Errorf("encode job: %w", err)
	}
	exists := expression.AttributeExists(expression.Name(AttrPK))
	var slots []txItem
	if legacy != "" {
		pk, sk := reservationKey(legacy)
		slots = append(slots, txItem{name: memberReservation, delete: &update{pk: pk, sk: sk,
			cond: exists.And(expression.Name(attrTenantID).Equal(expression.Value(it.TenantID)))}})
	}
	rpk, rsk := reservationKey(it.JobID)
	slots = append(slots,
		txItem{name: memberReservation, delete: &update{pk: rpk, sk: rsk, cond: exists}},
		txItem{name: memberTenantCount, update: tenantCount(it.TenantID, 1)})
	for _, slot := range slots {
		items := []txItem{{name: memberJobAbsent, put: av, putIf: expression.AttributeNotExists(expression.Name(AttrPK))}, slot}
		if check := legacyAbsent(it.TenantID, legacy); check != nil {
			items = append(items, *check)
		}
		err = s.transact(ctx, items...)
		var tf *txFailed
		switch {
		case err == nil:
			return true, nil
		case errors.As(err, &tf) && tf.failed(memberJobAbsent):
			return false, nil
		case errors.As(err, &tf) && tf.failed(memberLegacyJob):
			return false, errLegacyJob
		case errors.As(err, &tf):
			continue // no such reservation: the next way to hold a slot
		default:
			return false, err
		}
	}
	return false, fmt.Errorf("create job %s: no slot of tenant %s could be taken", it.JobID, it.TenantID)
}

// slotAfterTerminal is the tenant count change that gives back a finished
// job's slot; the relay writes it with the removal of the outcome event.
func slotAfterTerminal(eventType string, j *jobItem) *update {
	switch eventType {
	case EventSucceeded, EventDead, EventCanceled:
		if j.TenantSlot {
			return tenantCount(j.TenantID, -1)
		}
	}
	return nil
}

// retryRecount counts a dead job put back in the queue in its tenant's open
// jobs again, when it was counted before.
func retryRecount(it *jobItem) *update {
	if it.TenantSlot && it.Status == string(job.Dead) {
		return tenantCount(it.TenantID, 1)
	}
	return nil
}
