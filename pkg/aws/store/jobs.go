package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
)

// CreateJob files a submitted job in its fleet's queue: it turns the
// accepted record the API wrote at submit (AcceptJob) into the queued job,
// or, for a submission sent straight to the queue, creates the job. created
// is false for a repeat (the first submission wins, later ones change
// nothing), and also for a job canceled while it was accepted, which is
// never queued. A repeat answers the existing job only when it is the same
// tenant's: an id held by another tenant is ErrConflict and reveals nothing
// of that job. A tenant's job that a release before tenant-scoped ids
// stored under its key alone (tenant.KeyOf) is that job's repeat too.
func (s *Store) CreateJob(ctx context.Context, n job.Spec) (j job.Job, created bool, err error) {
	f, ok := s.cfg.FleetForWorkflow(n.WorkflowID)
	if !ok {
		return job.Job{}, false, fmt.Errorf("workflow %q is served by no fleet: %w", n.WorkflowID, ErrNotFound)
	}
	now := s.clock.Now()
	it := s.newJobItem(n, f, now)
	if n.Accepted {
		filed, err := s.fileAccepted(ctx, &it, now)
		if err != nil {
			return job.Job{}, false, err
		}
		if filed {
			return it.toJob(), true, nil
		}
	}
	legacy := tenant.KeyOf(n.TenantID, n.ID)
	if s.countsForTenant(n.TenantID) {
		it.TenantSlot = true
		created, err = s.createCounted(ctx, &it, legacy)
	} else {
		created, err = s.createUncounted(ctx, &it, legacy)
	}
	switch {
	case errors.Is(err, errLegacyJob):
		existing, err := s.GetJob(ctx, legacy)
		return existing, false, err
	case err != nil:
		return job.Job{}, false, fmt.Errorf("create job %s: %w", n.ID, err)
	case created:
		return it.toJob(), true, nil
	}
	existing, _, err := s.existingJob(ctx, n)
	if err != nil || existing.Status != job.Accepted || n.Accepted {
		return existing, false, err
	}
	// A submission the API accepted again after this one was queued
	// without its record (a release before accepted records, during the
	// upgrade): file the record now.
	filed, err := s.fileAccepted(ctx, &it, now)
	if err != nil || !filed {
		return existing, false, err
	}
	return it.toJob(), true, nil
}

// newJobItem is the queued job a submission asks for, created at now.
func (s *Store) newJobItem(n job.Spec, f *fleetconfig.Fleet, now time.Time) jobItem {
	it := jobItem{
		Type: typeJob, JobID: n.ID, TenantID: n.TenantID, WorkflowID: n.WorkflowID, Fleet: f.Slug,
		Status: string(job.Queued), Priority: n.Priority,
		MaxAttempts: n.MaxAttempts, MaxPreemptions: f.PreemptionCap,
		TimeoutS: n.TimeoutSeconds, QueueTimeoutS: n.QueueTimeoutSeconds,
		Input: string(n.Input), CallbackURL: n.CallbackURL,
		CreatedMS: ms(now), UpdatedMS: ms(now), NotBeforeMS: ms(now),
		Reason:  string(job.ReasonCreated),
		History: []job.HistoryEntry{{At: now, To: job.Queued, Reason: job.ReasonCreated}},
	}
	if it.MaxAttempts == 0 {
		it.MaxAttempts = f.Retry.MaxAttempts
	}
	if it.TimeoutS == 0 {
		it.TimeoutS = int(f.JobTimeout.Std() / time.Second)
	}
	if it.QueueTimeoutS == 0 {
		it.QueueTimeoutS = int(f.QueueTimeout.Std() / time.Second)
	}
	if it.QueueTimeoutS > 0 {
		it.QueueDeadlineMS = ms(now.Add(time.Duration(it.QueueTimeoutS) * time.Second))
	}
	it.PK, it.SK = jobKey(n.ID)
	it.GSI1PK, it.GSI1SK = s.readyPartition(f.Slug, n.ID), readySortKey(n.Priority, now, n.ID)
	return it
}

// errLegacyJob: the tenant's job already exists under its key alone, as a
// release before tenant-scoped ids stored it.
var errLegacyJob = errors.New("the tenant's job exists under its key alone")

// legacyAbsent is the condition that no job of the tenant is stored under
// the key alone (a release before tenant-scoped ids stored jobs so); it is
// nil when the id has no such key.
func legacyAbsent(tenantID, legacy string) *txItem {
	if legacy == "" {
		return nil
	}
	pk, sk := jobKey(legacy)
	return &txItem{name: memberLegacyJob, check: &update{pk: pk, sk: sk,
		cond: expression.AttributeNotExists(expression.Name(AttrPK)).Or(expression.Name(attrTenantID).NotEqual(expression.Value(tenantID)))}}
}

// createUncounted creates the job of a tenant without an open-jobs cap:
// one conditional put, in a transaction with the check of the job's key
// alone when the id has one.
func (s *Store) createUncounted(ctx context.Context, it *jobItem, legacy string) (bool, error) {
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return false, fmt.Errorf("encode job: %w", err)
	}
	absent := expression.AttributeNotExists(expression.Name(AttrPK))
	if check := legacyAbsent(it.TenantID, legacy); check != nil {
		err := s.transact(ctx, txItem{name: memberJobAbsent, put: av, putIf: absent}, *check)
		var tf *txFailed
		switch {
		case errors.As(err, &tf) && tf.failed(memberJobAbsent):
			return false, nil
		case errors.As(err, &tf):
			return false, errLegacyJob
		}
		return err == nil, err
	}
	e, err := expression.NewBuilder().WithCondition(absent).Build()
	if err != nil {
		return false, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if isConditionFailed(err) {
		return false, nil
	}
	return err == nil, err
}

// fileAccepted turns the accepted record of the job it into the queued job
// in one conditional write: every attribute of the new job but its
// creation time and tenant slot, which stay the acceptance's, and no
// expiry. It answers false, having written nothing, when there is no such
// record (none was written, dispatch filed it already, or it was canceled).
func (s *Store) fileAccepted(ctx context.Context, it *jobItem, now time.Time) (bool, error) {
	filed := *it
	filed.History = []job.HistoryEntry{{At: now, From: job.Accepted, To: job.Queued, Reason: job.ReasonCreated}}
	av, err := attributevalue.MarshalMap(filed)
	if err != nil {
		return false, fmt.Errorf("encode job: %w", err)
	}
	names := make([]string, 0, len(av))
	for name := range av {
		switch name {
		case AttrPK, AttrSK, attrCreatedMS, attrTenantSlot:
		default:
			names = append(names, name)
		}
	}
	sort.Strings(names)
	set := expression.Set(expression.Name(AttrTTL), null())
	for _, name := range names {
		set = set.Set(expression.Name(name), expression.Value(av[name]))
	}
	cond := expression.Name(attrStatus).Equal(expression.Value(string(job.Accepted))).
		And(expression.Name(attrTenantID).Equal(expression.Value(it.TenantID)))
	err = s.updateItem(ctx, update{pk: it.PK, sk: it.SK, set: set, cond: cond})
	if errors.Is(err, errConditionFailed) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("file accepted job %s: %w", it.JobID, err)
	}
	return true, nil
}

// AcceptJob records a submission as an accepted job before the API queues
// it, so that the job exists, can be read and canceled, from the moment the
// API answers; the dispatch function files it (CreateJob). The record holds
// what GET answers and what a cancel announces (tenant, workflow, fleet,
// limits, callback), not the input, which stays on the queue. A tenant with
// an open-jobs cap is counted in the same write, past which the answer is a
// *QuotaError and nothing is written. fresh says the job's key was made
// for this submission, so no release can have used it before; otherwise
// the tenant's job stored under the key alone by a release before
// tenant-scoped ids is looked for in the same write. accepted is false
// for a repeat, which writes nothing and answers the job that exists:
// accepted, filed, finished, or stored under its key alone.
func (s *Store) AcceptJob(ctx context.Context, n job.Spec, fresh bool) (j job.Job, accepted bool, err error) {
	// Concurrent submissions of a capped tenant meet on its counter item,
	// and DynamoDB cancels a transaction that meets another in flight: a
	// few tries absorb that before the caller sees ErrContention.
	for try := 1; ; try++ {
		j, accepted, err = s.acceptJob(ctx, n, fresh)
		if !errors.Is(err, ErrContention) || try == 3 {
			return j, accepted, err
		}
	}
}

func (s *Store) acceptJob(ctx context.Context, n job.Spec, fresh bool) (job.Job, bool, error) {
	f, ok := s.cfg.FleetForWorkflow(n.WorkflowID)
	if !ok {
		return job.Job{}, false, fmt.Errorf("workflow %q is served by no fleet: %w", n.WorkflowID, ErrNotFound)
	}
	now := s.clock.Now()
	it := s.newJobItem(n, f, now)
	it.Status, it.Reason, it.Input, it.History = string(job.Accepted), "", "", nil
	it.NotBeforeMS, it.QueueDeadlineMS = 0, 0
	it.TTL = now.Add(reservationRetention).Unix()
	counted := s.countsForTenant(n.TenantID)
	it.TenantSlot = counted
	// Filed apart from the fleet's queue until dispatch files it: only
	// the listing of accepted jobs reads A#<fleet>; no lease or count
	// sees an accepted job.
	it.GSI1PK, it.GSI1SK = s.shardFor(prefixAccepted, f.Slug, n.ID), timeSortKey(now, n.ID)
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return job.Job{}, false, fmt.Errorf("encode job: %w", err)
	}
	items := []txItem{{name: memberJobAbsent, put: av, putIf: expression.AttributeNotExists(expression.Name(AttrPK))}}
	legacy := ""
	if !fresh {
		legacy = tenant.KeyOf(n.TenantID, n.ID)
	}
	if check := legacyAbsent(n.TenantID, legacy); check != nil {
		items = append(items, *check)
	}
	limit := s.cfg.Tenant(n.TenantID).MaxQueued
	if counted {
		count := tenantCount(n.TenantID, 1)
		open := expression.Name(attrOpen)
		count.cond = expression.Or(expression.AttributeNotExists(open), open.LessThan(expression.Value(limit)))
		items = append(items, txItem{name: memberTenantCount, update: count})
	}
	if len(items) == 1 {
		created, err := s.createUncounted(ctx, &it, "")
		if err != nil || created {
			return it.toJob(), created, err
		}
		existing, _, err := s.existingJob(ctx, n)
		return existing, false, err
	}
	err = s.transact(ctx, items...)
	var tf *txFailed
	// The repeat checks come first: a repeat is a repeat even at the cap.
	switch {
	case err == nil:
		return it.toJob(), true, nil
	case errors.As(err, &tf) && tf.failed(memberJobAbsent):
		existing, _, err := s.existingJob(ctx, n)
		return existing, false, err
	case errors.As(err, &tf) && tf.failed(memberLegacyJob):
		existing, err := s.GetJob(ctx, legacy)
		return existing, false, err
	case errors.As(err, &tf):
		open, rerr := s.TenantOpenJobs(ctx, n.TenantID)
		if rerr != nil {
			open = limit
		}
		return job.Job{}, false, &QuotaError{Tenant: n.TenantID, Cap: limit, Open: open}
	default:
		return job.Job{}, false, fmt.Errorf("accept job %s: %w", n.ID, err)
	}
}

// WithdrawJob removes a job AcceptJob accepted whose submission could not
// be queued, and gives back its tenant slot. A job no longer accepted
// (filed, canceled) is left as it is.
func (s *Store) WithdrawJob(ctx context.Context, tenantID, id string) error {
	pk, sk := jobKey(id)
	accepted := expression.Name(attrStatus).Equal(expression.Value(string(job.Accepted))).
		And(expression.Name(attrTenantID).Equal(expression.Value(tenantID)))
	withSlot := accepted.And(expression.Name(attrTenantSlot).Equal(expression.Value(true)))
	err := s.transact(ctx,
		txItem{name: memberJob, delete: &update{pk: pk, sk: sk, cond: withSlot}},
		txItem{name: memberTenantCount, update: tenantCount(tenantID, -1)},
	)
	var tf *txFailed
	if !errors.As(err, &tf) {
		if err != nil {
			return fmt.Errorf("withdraw job %s: %w", id, err)
		}
		return nil
	}
	e, err := expression.NewBuilder().WithCondition(accepted).Build()
	if err != nil {
		return err
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("withdraw job %s: %w", id, err)
	}
	return nil
}

// existingJob is the job a repeated create found, if it is the same tenant's.
func (s *Store) existingJob(ctx context.Context, n job.Spec) (job.Job, bool, error) {
	existing, err := s.GetJob(ctx, n.ID)
	if err != nil {
		return job.Job{}, false, err
	}
	if existing.TenantID != n.TenantID {
		return job.Job{}, false, fmt.Errorf("create job %s for tenant %s: the id is another tenant's: %w", n.ID, n.TenantID, ErrConflict)
	}
	return existing, false, nil
}

// GetTenantJob reads tenant's job id (tenant.JobID): the job stored under
// that id, or else the tenant's job that a release before tenant-scoped ids
// stored under the key alone (tenant.KeyOf). Another tenant's job is
// ErrNotFound. A job under its full id costs one read, a job stored under
// its key alone or none two.
func (s *Store) GetTenantJob(ctx context.Context, tenantID, id string) (job.Job, error) {
	j, err := s.GetJob(ctx, id)
	if err == nil || !errors.Is(err, ErrNotFound) {
		if err == nil && j.TenantID != tenantID {
			return job.Job{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
		}
		return j, err
	}
	legacy := tenant.KeyOf(tenantID, id)
	if legacy == "" {
		return job.Job{}, err
	}
	j, lerr := s.GetJob(ctx, legacy)
	if lerr != nil || j.TenantID != tenantID {
		return job.Job{}, err
	}
	return j, nil
}

// GetJob reads a job (strongly consistent).
func (s *Store) GetJob(ctx context.Context, id string) (job.Job, error) {
	it, err := s.getJobItem(ctx, id)
	if err != nil {
		return job.Job{}, err
	}
	return it.toJob(), nil
}

func (s *Store) getJobItem(ctx context.Context, id string) (*jobItem, error) {
	pk, sk := jobKey(id)
	var it jobItem
	found, err := s.getItem(ctx, pk, sk, &it)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	return &it, nil
}

// change describes one transition of a job; jobUpdate turns it into the
// conditional write. It is the one place that knows where each status lives
// in IndexByState, so no transition can leave a job in a stale partition.
type change struct {
	it          *jobItem // the job as read, or the index candidate
	full        bool     // it is the whole item: rewrite (and trim) the history
	to          job.Status
	reason      job.Reason
	notBefore   time.Time
	attempts    int
	preemptions int
	jobErr      *job.Error
	result      string
	worker      string // for the history entry
	// onDemandOnly pins the job to On-Demand workers (set, never cleared,
	// by a change; RetryDead clears it).
	onDemandOnly bool
	// keepCounters leaves attempts and preemptions as stored (the change
	// does not know them, e.g. a completion that read nothing).
	keepCounters bool
}

func (s *Store) jobUpdate(c change, cond expression.ConditionBuilder, now time.Time) update {
	it := c.it
	var pk, sk string
	switch {
	case c.to == job.Queued && c.notBefore.After(now):
		pk, sk = delayedPartition(it.Fleet), timeSortKey(c.notBefore, it.JobID)
	case c.to == job.Queued:
		pk, sk = s.readyPartition(it.Fleet, it.JobID), readySortKey(it.Priority, fromMS(it.CreatedMS), it.JobID)
	default:
		pk, sk = s.terminalPartition(it.Fleet, c.to, it.JobID), timeSortKey(now, it.JobID)
	}
	entry := job.HistoryEntry{At: now, From: job.Status(it.Status), To: c.to, Reason: c.reason, Worker: c.worker, Attempt: it.Attempts}
	set := expression.Set(expression.Name(attrStatus), expression.Value(string(c.to))).
		Set(expression.Name(AttrGSI1PK), expression.Value(pk)).
		Set(expression.Name(AttrGSI1SK), expression.Value(sk)).
		Set(expression.Name(attrUpdatedMS), expression.Value(ms(now))).
		Set(expression.Name(attrReason), expression.Value(c.reason))
	if !c.keepCounters {
		set = set.Set(expression.Name(attrAttempts), expression.Value(c.attempts)).
			Set(expression.Name(attrPreemptions), expression.Value(c.preemptions))
	}
	if c.full {
		set = set.Set(expression.Name(attrHistory), expression.Value(append(job.Trim(it.History, 1), entry)))
	} else {
		set = set.Set(expression.Name(attrHistory), expression.ListAppend(expression.Name(attrHistory), expression.Value([]job.HistoryEntry{entry})))
	}
	if c.to == job.Queued {
		nb := c.notBefore
		if nb.Before(now) {
			nb = now
		}
		set = set.Set(expression.Name(attrNotBeforeMS), expression.Value(ms(nb)))
	}
	if c.to.Terminal() {
		set = set.Set(expression.Name(AttrTTL), expression.Value(now.Add(s.retention()).Unix()))
	}
	if c.onDemandOnly {
		set = set.Set(expression.Name(attrOnDemandOnly), expression.Value(true))
	}
	if c.jobErr != nil {
		set = set.Set(expression.Name(attrError), expression.Value(c.jobErr)).
			Set(expression.Name(attrErrorCode), expression.Value(c.jobErr.Code))
	}
	if c.result != "" {
		set = set.Set(expression.Name(attrResult), expression.Value(c.result))
	}
	// A lease that holds a slot of its tenant's leased counter gives it
	// back in the write that ends it (leasecap.go).
	return update{pk: it.PK, sk: it.SK, set: set, cond: cond, event: s.outboxItem(c, now), tally: leaseSlotRelease(it, now)}
}

// leaseHeld is the condition that the job is leased under this token.
func leaseHeld(token string) expression.ConditionBuilder {
	return expression.Name(attrStatus).Equal(expression.Value(string(job.Leased))).
		And(expression.Name(attrLeaseToken).Equal(expression.Value(token)))
}

// leaseHeldBy adds that the lease belongs to this worker.
func leaseHeldBy(token, worker string) expression.ConditionBuilder {
	return leaseHeld(token).And(expression.Name(attrWorkerID).Equal(expression.Value(worker)))
}

// releaseFromWorker is the worker half of ending a lease: one lease fewer,
// and the release time the scaler reads as "idle since".
func releaseFromWorker(workerID string, now time.Time, cond expression.ConditionBuilder) *update {
	pk, sk := workerKey(workerID)
	return &update{pk: pk, sk: sk,
		set: expression.Set(expression.Name(attrLeases), expression.Minus(expression.Name(attrLeases), expression.Value(1))).
			Set(expression.Name(attrLastReleaseMS), expression.Value(ms(now))),
		cond: cond,
	}
}

// releaseBySystem ends a lease on the control plane's initiative (expiry,
// cancel, revoke, instance gone): the job write and the holder's lease count
// move together; when the holder no longer exists, the job moves alone.
func (s *Store) releaseBySystem(ctx context.Context, u update, holder string, now time.Time) error {
	if holder != "" {
		err := s.transact(ctx, txItem{name: memberJob, update: &u}, txItem{name: memberWorker, update: releaseFromWorker(holder, now, expression.AttributeExists(expression.Name(AttrPK)))})
		var tf *txFailed
		switch {
		case err == nil:
			return nil
		case errors.As(err, &tf) && tf.failed(memberJob):
			return errConditionFailed
		case errors.As(err, &tf) && tf.failed(memberWorker):
			// holder deleted: fall through to the job-only write
		default:
			return err
		}
	}
	return s.updateItem(ctx, u)
}

// ListJobs lists a fleet's jobs in one status, newest change first for
// finished jobs and queue order for queued ones. Index reads are eventually
// consistent, so a job that just changed may show in its old status briefly.
func (s *Store) ListJobs(ctx context.Context, fleet string, status job.Status, limit int) ([]job.Summary, error) {
	var parts []string
	forward := false
	switch status {
	case job.Queued:
	case job.Accepted:
		parts, forward = s.shardPartitions(prefixAccepted, fleet), true
	case job.Leased:
		parts, forward = s.shardPartitions(prefixLeased, fleet), true
	case job.Succeeded, job.Dead, job.Canceled:
		parts = s.terminalPartitions(fleet, status)
	default:
		return nil, fmt.Errorf("status %q: %w", status, ErrNotFound)
	}
	var items []jobItem
	var err error
	// Each shard's first `limit` hold the partition's first `limit`.
	if status == job.Queued {
		items, err = s.readReady(ctx, fleet, limit)
	} else {
		items, err = s.readShards(ctx, parts, "", "", limit, forward)
	}
	if limit > 0 && len(items) > limit {
		items = items[:limit]
	}
	if err != nil {
		return nil, err
	}
	if status == job.Queued && (limit <= 0 || len(items) < limit) {
		more, err := s.queryIndex(ctx, delayedPartition(fleet), "", limit-len(items), true)
		if err != nil {
			return nil, err
		}
		items = append(items, more...)
	}
	out := make([]job.Summary, 0, len(items))
	for _, it := range items {
		out = append(out, it.summary())
	}
	return out, nil
}

// JobTTL returns the expiry (Unix seconds) set on a job's record, 0 when none.
func (s *Store) JobTTL(ctx context.Context, id string) (int64, error) {
	it, err := s.getJobItem(ctx, id)
	if err != nil {
		return 0, err
	}
	return it.TTL, nil
}

// jobItem is a job as stored. Times are Unix milliseconds so conditions can
// compare them as numbers; input and result are kept as JSON text so they
// come back byte for byte.
type jobItem struct {
	PK     string `dynamodbav:"PK"`
	SK     string `dynamodbav:"SK"`
	GSI1PK string `dynamodbav:"GSI1PK"`
	GSI1SK string `dynamodbav:"GSI1SK"`
	Type   string `dynamodbav:"type"`

	JobID      string `dynamodbav:"job_id"`
	TenantID   string `dynamodbav:"tenant_id"`
	WorkflowID string `dynamodbav:"workflow_id"`
	Fleet      string `dynamodbav:"fleet"`
	Status     string `dynamodbav:"status"`
	Priority   int    `dynamodbav:"priority"`

	Attempts       int `dynamodbav:"attempts"`
	MaxAttempts    int `dynamodbav:"max_attempts"`
	Preemptions    int `dynamodbav:"preemptions"`
	MaxPreemptions int `dynamodbav:"max_preemptions"`
	// OnDemandOnly: only On-Demand workers may lease the job (it reached
	// its preemption cap in a fleet with an On-Demand rung). It is in the
	// index projection, so the lease path and the scaler see it on the
	// candidates they already read.
	OnDemandOnly  bool `dynamodbav:"on_demand_only,omitempty"`
	TimeoutS      int  `dynamodbav:"timeout_s"`
	QueueTimeoutS int  `dynamodbav:"queue_timeout_s"`

	Input     string     `dynamodbav:"input,omitempty"`
	Result    string     `dynamodbav:"result,omitempty"`
	Error     *job.Error `dynamodbav:"error,omitempty"`
	ErrorCode string     `dynamodbav:"error_code,omitempty"`

	CreatedMS      int64 `dynamodbav:"created_ms"`
	UpdatedMS      int64 `dynamodbav:"updated_ms"`
	NotBeforeMS    int64 `dynamodbav:"not_before_ms"`
	FirstLeasedMS  int64 `dynamodbav:"first_leased_ms,omitempty"`
	LeasedMS       int64 `dynamodbav:"leased_ms,omitempty"`
	LeaseExpiresMS int64 `dynamodbav:"lease_expires_ms,omitempty"`
	// LeaseUntilMS is the expiry the lease's last heartbeat set (absent on
	// a lease nobody has extended since it was filed, and on items written
	// before heartbeats stopped moving the index entry).
	LeaseUntilMS int64 `dynamodbav:"lease_until_ms,omitempty"`
	// QueueDeadlineMS is when a never-leased job expires (0: never; cleared
	// by the first lease). RunDeadlineMS is when the current attempt must
	// end (0: no limit).
	QueueDeadlineMS int64 `dynamodbav:"queue_deadline_ms"`
	RunDeadlineMS   int64 `dynamodbav:"run_deadline_ms"`

	LeaseToken string `dynamodbav:"lease_token,omitempty"`
	// LeaseAuth is the lease holder's token digest (attrLeaseAuth); absent
	// on leases taken by releases before it was kept.
	LeaseAuth       string   `dynamodbav:"lease_auth,omitempty"`
	WorkerID        string   `dynamodbav:"worker_id,omitempty"`
	Progress        *float64 `dynamodbav:"progress,omitempty"`
	Reason          string   `dynamodbav:"reason,omitempty"`
	CancelRequested bool     `dynamodbav:"cancel_requested,omitempty"`
	// TenantSlot: the job holds a slot of its tenant's open jobs (tenants.go).
	TenantSlot bool `dynamodbav:"tenant_slot,omitempty"`
	// CostUSD is the finished job's cost, set by the relay of its outcome
	// (costs.go); nil until then or when it could not be priced.
	CostUSD *float64 `dynamodbav:"cost_usd,omitempty"`

	History []job.HistoryEntry `dynamodbav:"history"`
	TTL     int64              `dynamodbav:"ttl,omitempty"`

	CallbackURL string         `dynamodbav:"callback_url,omitempty"`
	Callback    *callbackState `dynamodbav:"callback,omitempty"`
}

// leaseExpires is when the lease runs out: the later of the expiry filed
// in the index and the one the last heartbeat set.
func (it *jobItem) leaseExpires() int64 { return max(it.LeaseExpiresMS, it.LeaseUntilMS) }

// leaseRunOut is the condition that a job's lease has run out at now: both
// expiries have passed (an item never heartbeated has no lease_until_ms).
func leaseRunOut(now time.Time) expression.ConditionBuilder {
	until := expression.Name(attrLeaseUntilMS)
	return expression.Name(attrLeaseExpiresMS).LessThanEqual(expression.Value(ms(now))).
		And(expression.Or(expression.AttributeNotExists(until), until.LessThanEqual(expression.Value(ms(now)))))
}

func (it *jobItem) toJob() job.Job {
	j := job.Job{
		ID:                  it.JobID,
		TenantID:            it.TenantID,
		WorkflowID:          it.WorkflowID,
		FleetSlug:           it.Fleet,
		Status:              job.Status(it.Status),
		Priority:            it.Priority,
		Attempts:            it.Attempts,
		MaxAttempts:         it.MaxAttempts,
		Preemptions:         it.Preemptions,
		MaxPreemptions:      it.MaxPreemptions,
		OnDemandOnly:        it.OnDemandOnly,
		TimeoutSeconds:      it.TimeoutS,
		QueueTimeoutSeconds: it.QueueTimeoutS,
		Error:               it.Error,
		CreatedAt:           fromMS(it.CreatedMS),
		UpdatedAt:           fromMS(it.UpdatedMS),
		NotBefore:           fromMS(it.NotBeforeMS),
		FirstLeasedAt:       fromMS(it.FirstLeasedMS),
		LeasedAt:            fromMS(it.LeasedMS),
		LeaseExpiresAt:      fromMS(it.leaseExpires()),
		LeaseToken:          it.LeaseToken,
		WorkerID:            it.WorkerID,
		Progress:            it.Progress,
		Reason:              job.Reason(it.Reason),
		CancelRequested:     it.CancelRequested,
		History:             it.History,
		CostUSD:             it.CostUSD,
		CallbackURL:         it.CallbackURL,
		Callback:            it.Callback.toJob(),
	}
	if it.Input != "" {
		j.Input = json.RawMessage(it.Input)
	}
	if it.Result != "" {
		j.Result = json.RawMessage(it.Result)
	}
	return j
}
