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
// before it is queued, atomically with a reservation item for its job id,
// and only while the count is below the cap; the dispatch function hands
// the slot to the job when it creates it (the job carries tenant_slot), and
// the outbox relay gives the slot back, once, when it removes the job's
// outcome event. docs/data-model.md, "Tenant counters", has the whole
// life of a slot.

// reservationRetention outlives any submission queue message (SQS keeps
// them at most 14 days); TTL only removes a reservation whose job was
// never created.
const reservationRetention = 15 * 24 * time.Hour

// ErrOverQuota: the tenant already has as many open jobs as its cap allows.
var ErrOverQuota = errors.New("tenant is at its open-jobs cap")

// QuotaError is ErrOverQuota with the tenant, its cap and its count.
type QuotaError struct {
	Tenant string
	Cap    int
	Open   int
}

// Error says which tenant is at which cap.
func (e *QuotaError) Error() string {
	return fmt.Sprintf("tenant %q has %d open jobs, its cap (max_queued) is %d", e.Tenant, e.Open, e.Cap)
}

// Unwrap makes errors.Is(err, ErrOverQuota) hold.
func (e *QuotaError) Unwrap() error { return ErrOverQuota }

type tenantItem struct {
	PK   string `dynamodbav:"PK"`
	SK   string `dynamodbav:"SK"`
	Open int    `dynamodbav:"open"`
}

type reservationItem struct {
	PK     string `dynamodbav:"PK"`
	SK     string `dynamodbav:"SK"`
	Type   string `dynamodbav:"type"`
	JobID  string `dynamodbav:"job_id"`
	Tenant string `dynamodbav:"tenant_id"`
	AtMS   int64  `dynamodbav:"at_ms"`
	TTL    int64  `dynamodbav:"ttl"`
}

const typeReservation = "reservation"

// tenantCount is the change of a tenant's open jobs by delta.
func tenantCount(tenant string, delta int) *update {
	pk, sk := tenantKey(tenant)
	open := expression.Name(attrOpen)
	return &update{pk: pk, sk: sk, set: expression.Set(open, expression.Plus(expression.IfNotExists(open, expression.Value(0)), expression.Value(delta)))}
}

// ReserveTenantSlot counts a submission in its tenant's open jobs before it
// is queued, when the count is below limit. It answers true when it took a
// slot, false for a repeat (the job id is already reserved or the job
// exists: the repeat changes nothing), and a *QuotaError when the tenant is
// at its cap.
func (s *Store) ReserveTenantSlot(ctx context.Context, tenant, jobID string, limit int) (bool, error) {
	// Concurrent submissions of one tenant meet on its counter item, and
	// DynamoDB cancels a transaction that meets another in flight: a few
	// tries absorb that before the caller sees ErrContention.
	for try := 1; ; try++ {
		took, err := s.reserveTenantSlot(ctx, tenant, jobID, limit)
		if !errors.Is(err, ErrContention) || try == 3 {
			return took, err
		}
	}
}

func (s *Store) reserveTenantSlot(ctx context.Context, tenant, jobID string, limit int) (bool, error) {
	now := s.clock.Now()
	count := tenantCount(tenant, 1)
	open := expression.Name(attrOpen)
	count.cond = expression.Or(expression.AttributeNotExists(open), open.LessThan(expression.Value(limit)))
	rpk, rsk := reservationKey(jobID)
	res, err := attributevalue.MarshalMap(reservationItem{PK: rpk, SK: rsk, Type: typeReservation, JobID: jobID, Tenant: tenant,
		AtMS: ms(now), TTL: now.Add(reservationRetention).Unix()})
	if err != nil {
		return false, fmt.Errorf("encode reservation: %w", err)
	}
	jpk, jsk := jobKey(jobID)
	absent := expression.AttributeNotExists(expression.Name(AttrPK))
	// The repeat checks come first: a repeat is a repeat even at the cap.
	err = s.transact(ctx,
		txItem{name: memberReservation, put: res, putIf: absent},
		txItem{name: memberJobAbsent, check: &update{pk: jpk, sk: jsk, cond: absent}},
		txItem{name: memberTenantCount, update: count},
	)
	var tf *txFailed
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &tf) && (tf.failed(memberReservation) || tf.failed(memberJobAbsent)):
		return false, nil
	case errors.As(err, &tf):
		n, rerr := s.TenantOpenJobs(ctx, tenant)
		if rerr != nil {
			n = limit
		}
		return false, &QuotaError{Tenant: tenant, Cap: limit, Open: n}
	default:
		return false, fmt.Errorf("reserve a slot of tenant %s: %w", tenant, err)
	}
}

// ReleaseTenantSlot gives back the slot ReserveTenantSlot took for a job
// that was not queued after all. Releasing twice, or a slot already handed
// to its job, changes nothing.
func (s *Store) ReleaseTenantSlot(ctx context.Context, tenant, jobID string) error {
	rpk, rsk := reservationKey(jobID)
	err := s.transact(ctx,
		txItem{name: memberReservation, delete: &update{pk: rpk, sk: rsk, cond: expression.AttributeExists(expression.Name(AttrPK))}},
		txItem{name: memberTenantCount, update: tenantCount(tenant, -1)},
	)
	var tf *txFailed
	if errors.As(err, &tf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release the slot of job %s: %w", jobID, err)
	}
	return nil
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

// createCounted creates a job of a capped tenant: it takes over the slot of
// its reservation, or without one (a submission queued while its release
// was under way, or accepted before the cap was set) takes a slot itself,
// past the cap: the job is already accepted. created is false for a repeat,
// which changes nothing.
func (s *Store) createCounted(ctx context.Context, it *jobItem) (created bool, err error) {
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return false, fmt.Errorf("encode job: %w", err)
	}
	absent := expression.AttributeNotExists(expression.Name(AttrPK))
	rpk, rsk := reservationKey(it.JobID)
	err = s.transact(ctx,
		txItem{name: memberJobAbsent, put: av, putIf: absent},
		txItem{name: memberReservation, delete: &update{pk: rpk, sk: rsk, cond: expression.AttributeExists(expression.Name(AttrPK))}},
	)
	var tf *txFailed
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &tf) && tf.failed(memberJobAbsent):
		return false, nil
	case errors.As(err, &tf):
		// No reservation: count the job as it is created.
		err = s.transact(ctx, txItem{name: memberJobAbsent, put: av, putIf: absent}, txItem{name: memberTenantCount, update: tenantCount(it.TenantID, 1)})
		if errors.As(err, &tf) {
			return false, nil
		}
		return err == nil, err
	default:
		return false, err
	}
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
