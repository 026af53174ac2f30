package store

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/job"
)

// WorkerStatus is whether a worker may take new work.
type WorkerStatus string

// Worker statuses.
const (
	WorkerActive   WorkerStatus = "active"
	WorkerDraining WorkerStatus = "draining"
	WorkerRevoked  WorkerStatus = "revoked"
)

// Worker is a registered worker.
type Worker struct {
	ID             string
	Fleet          string
	Stage          string
	InstanceID     string
	InstanceType   string
	AZ             string
	Capabilities   json.RawMessage
	Providers      []string
	MaxConcurrency int
	TokenHash      string
	Status         WorkerStatus
	Approved       bool
	Leases         int
	RegisteredAt   time.Time
	LastSeenAt     time.Time
	// LastReleaseAt is when the worker last gave up a lease (zero if never).
	LastReleaseAt time.Time
	// LastClaimAt is when the worker last leased a job (zero if never).
	LastClaimAt time.Time
	// SourceIP is the address the worker last registered from.
	SourceIP string
}

// IdleSince is when the worker last held no lease: its last release, or its
// registration if it never had one. It is zero while it holds a lease.
func (w Worker) IdleSince() time.Time {
	if w.Leases > 0 {
		return time.Time{}
	}
	if w.LastReleaseAt.After(w.RegisteredAt) {
		return w.LastReleaseAt
	}
	return w.RegisteredAt
}

// WorkerAuth is what a worker's bearer token proves: who it is, its fleet, and
// the digest the stored token must match. Every worker operation re-checks
// the digest inside its own conditional write, so a rotated or revoked token
// stops working atomically with the change.
type WorkerAuth struct {
	WorkerID  string
	Fleet     string
	TokenHash string
}

// Registration is a worker announcing itself.
type Registration struct {
	WorkerID       string
	Fleet          string
	Stage          string
	InstanceID     string
	InstanceType   string
	AZ             string
	Capabilities   json.RawMessage
	Providers      []string
	MaxConcurrency int
	TokenHash      string
	SourceIP       string
}

// RegisterWorker creates the worker, or, when it exists, replaces its token
// and details while keeping its leases. New workers count against the fleet's
// worker cap (ErrFleetFull past it); a worker registered to another fleet is
// ErrConflict.
func (s *Store) RegisterWorker(ctx context.Context, r Registration) (Worker, error) {
	f, err := s.fleet(r.Fleet)
	if err != nil {
		return Worker{}, err
	}
	now := s.clock.Now()
	for range 3 {
		w, err := s.createWorker(ctx, r, f.WorkerCap, !f.RequireApproval, now)
		if err == nil || !errors.Is(err, errExists) {
			return w, err
		}
		w, err = s.reregisterWorker(ctx, r, now)
		if err == nil || !errors.Is(err, ErrNotFound) {
			return w, err
		}
		// Deregistered between the two writes: create it again.
	}
	return Worker{}, fmt.Errorf("register worker %s: %w", r.WorkerID, ErrContention)
}

var errExists = errors.New("already exists")

func (s *Store) createWorker(ctx context.Context, r Registration, workerCap int, approved bool, now time.Time) (Worker, error) {
	pk, sk := workerKey(r.WorkerID)
	it := workerItem{
		PK: pk, SK: sk, Type: "worker",
		GSI1PK: workersPartition(r.Fleet), GSI1SK: r.WorkerID,
		WorkerID: r.WorkerID, Fleet: r.Fleet, Stage: r.Stage,
		InstanceID: r.InstanceID, InstanceType: r.InstanceType, AZ: r.AZ,
		Capabilities: string(r.Capabilities), Providers: r.Providers,
		MaxConcurrency: r.MaxConcurrency, TokenHash: r.TokenHash,
		Status: string(WorkerActive), Approved: approved,
		RegisteredMS: ms(now), LastSeenMS: ms(now), SourceIP: r.SourceIP,
	}
	if r.InstanceID != "" {
		it.GSI2PK, it.GSI2SK = instancePartition(r.InstanceID), r.WorkerID
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return Worker{}, fmt.Errorf("encode worker: %w", err)
	}
	fpk, fsk := fleetKey(r.Fleet)
	count := expression.Name("workers")
	err = s.transact(ctx,
		txItem{put: av, putIf: expression.AttributeNotExists(expression.Name(AttrPK))},
		txItem{update: &update{
			pk: fpk, sk: fsk,
			set:  expression.Add(count, expression.Value(1)).Set(expression.Name("fleet"), expression.Value(r.Fleet)),
			cond: expression.Or(count.AttributeNotExists(), count.LessThan(expression.Value(workerCap))),
		}},
	)
	var tf *txFailed
	switch {
	case err == nil:
		return it.toWorker(), nil
	case errors.As(err, &tf) && tf.failedAt(0):
		return Worker{}, errExists
	case errors.As(err, &tf) && tf.failedAt(1):
		return Worker{}, fmt.Errorf("fleet %s has %d workers: %w", r.Fleet, workerCap, ErrFleetFull)
	default:
		return Worker{}, fmt.Errorf("create worker %s: %w", r.WorkerID, err)
	}
}

func (s *Store) reregisterWorker(ctx context.Context, r Registration, now time.Time) (Worker, error) {
	pk, sk := workerKey(r.WorkerID)
	set := expression.Set(expression.Name("token_hash"), expression.Value(r.TokenHash)).
		Set(expression.Name("stage"), expression.Value(r.Stage)).
		Set(expression.Name("max_concurrency"), expression.Value(r.MaxConcurrency)).
		Set(expression.Name("last_seen_ms"), expression.Value(ms(now))).
		Set(expression.Name("source_ip"), expression.Value(r.SourceIP))
	if r.InstanceID != "" {
		set = set.Set(expression.Name("instance_id"), expression.Value(r.InstanceID)).
			Set(expression.Name(AttrGSI2PK), expression.Value(instancePartition(r.InstanceID))).
			Set(expression.Name(AttrGSI2SK), expression.Value(r.WorkerID))
	}
	if r.InstanceType != "" {
		set = set.Set(expression.Name("instance_type"), expression.Value(r.InstanceType))
	}
	if r.AZ != "" {
		set = set.Set(expression.Name("az"), expression.Value(r.AZ))
	}
	if len(r.Capabilities) > 0 {
		set = set.Set(expression.Name("capabilities"), expression.Value(string(r.Capabilities)))
	}
	if len(r.Providers) > 0 {
		set = set.Set(expression.Name("providers"), expression.Value(r.Providers))
	}
	err := s.updateItem(ctx, update{pk: pk, sk: sk, set: set,
		cond: expression.AttributeExists(expression.Name(AttrPK)).And(expression.Name("fleet").Equal(expression.Value(r.Fleet))),
	})
	if errors.Is(err, errConditionFailed) {
		var cur workerItem
		found, gerr := s.getItem(ctx, pk, sk, &cur)
		switch {
		case gerr != nil:
			return Worker{}, gerr
		case !found:
			return Worker{}, ErrNotFound
		default:
			return Worker{}, fmt.Errorf("worker %s is registered to fleet %s; deregister it first: %w", r.WorkerID, cur.Fleet, ErrConflict)
		}
	}
	if err != nil {
		return Worker{}, err
	}
	return s.GetWorker(ctx, r.WorkerID)
}

// GetWorker reads a worker (strongly consistent).
func (s *Store) GetWorker(ctx context.Context, id string) (Worker, error) {
	pk, sk := workerKey(id)
	var it workerItem
	found, err := s.getItem(ctx, pk, sk, &it)
	if err != nil {
		return Worker{}, err
	}
	if !found {
		return Worker{}, fmt.Errorf("worker %s: %w", id, ErrNotFound)
	}
	return it.toWorker(), nil
}

// Authorize checks a worker's token digest against the stored one (in
// constant time) and that it is not revoked.
func (s *Store) Authorize(ctx context.Context, a WorkerAuth) (Worker, error) {
	w, err := s.GetWorker(ctx, a.WorkerID)
	if errors.Is(err, ErrNotFound) {
		return Worker{}, ErrUnauthenticated
	}
	if err != nil {
		return Worker{}, err
	}
	if w.Fleet != a.Fleet || subtle.ConstantTimeCompare([]byte(w.TokenHash), []byte(a.TokenHash)) != 1 {
		return Worker{}, ErrUnauthenticated
	}
	if w.Status == WorkerRevoked {
		return Worker{}, ErrRevoked
	}
	return w, nil
}

// authCond is the condition every worker-initiated write puts on the worker
// item: this token, and not revoked.
func authCond(a WorkerAuth) expression.ConditionBuilder {
	return expression.Name("token_hash").Equal(expression.Value(a.TokenHash)).
		And(expression.Name("wstatus").NotEqual(expression.Value(string(WorkerRevoked))))
}

// TouchWorker marks a worker seen (an empty poll), checking its token.
func (s *Store) TouchWorker(ctx context.Context, a WorkerAuth) error {
	pk, sk := workerKey(a.WorkerID)
	err := s.updateItem(ctx, update{pk: pk, sk: sk,
		set:  expression.Set(expression.Name("last_seen_ms"), expression.Value(ms(s.clock.Now()))),
		cond: authCond(a),
	})
	if errors.Is(err, errConditionFailed) {
		_, aerr := s.Authorize(ctx, a)
		if aerr == nil {
			return fmt.Errorf("touch worker %s: %w", a.WorkerID, ErrContention)
		}
		return aerr
	}
	return err
}

// ListWorkers returns the workers of a fleet.
func (s *Store) ListWorkers(ctx context.Context, fleet string) ([]Worker, error) {
	items, err := s.queryWorkers(ctx, workersPartition(fleet))
	if err != nil {
		return nil, err
	}
	out := make([]Worker, 0, len(items))
	for i := range items {
		out = append(out, items[i].toWorker())
	}
	return out, nil
}

func (s *Store) queryWorkers(ctx context.Context, partition string) ([]workerItem, error) {
	kc := expression.Key(AttrGSI1PK).Equal(expression.Value(partition))
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(IndexByState),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}
	var out []workerItem
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", partition, err)
		}
		var page []workerItem
		if err := attributevalue.UnmarshalListOfMaps(res.Items, &page); err != nil {
			return nil, fmt.Errorf("decode workers: %w", err)
		}
		out = append(out, page...)
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// WorkerByInstance finds the worker running on an EC2 instance. The index
// read only finds the candidate; the worker is then read consistently.
func (s *Store) WorkerByInstance(ctx context.Context, instanceID string) (Worker, error) {
	kc := expression.Key(AttrGSI2PK).Equal(expression.Value(instancePartition(instanceID)))
	e, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return Worker{}, err
	}
	res, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.table), IndexName: aws.String(IndexByInstance),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		return Worker{}, fmt.Errorf("query instance %s: %w", instanceID, err)
	}
	for _, item := range res.Items {
		var it workerItem
		if err := attributevalue.UnmarshalMap(item, &it); err != nil {
			return Worker{}, err
		}
		w, err := s.GetWorker(ctx, it.WorkerID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return Worker{}, err
		}
		if w.InstanceID == instanceID {
			return w, nil
		}
	}
	return Worker{}, fmt.Errorf("instance %s: %w", instanceID, ErrNotFound)
}

// SetWorkerApproved approves a worker (or withdraws approval).
func (s *Store) SetWorkerApproved(ctx context.Context, id string, approved bool) (Worker, error) {
	return s.setWorker(ctx, id, expression.Set(expression.Name("approved"), expression.Value(approved)), expression.ConditionBuilder{})
}

// DrainWorker stops a worker from taking new leases; its running jobs go on.
func (s *Store) DrainWorker(ctx context.Context, id string) (Worker, error) {
	return s.setWorker(ctx, id, expression.Set(expression.Name("wstatus"), expression.Value(string(WorkerDraining))),
		expression.Name("wstatus").NotEqual(expression.Value(string(WorkerRevoked))))
}

// DrainIdleWorker marks a worker draining only while it holds no lease. It is
// how scale-in claims a victim: the same item carries the lease count that
// every claim increments in its transaction, so a victim either had no lease
// and can never get one, or the drain fails.
func (s *Store) DrainIdleWorker(ctx context.Context, id string) error {
	pk, sk := workerKey(id)
	err := s.updateItem(ctx, update{pk: pk, sk: sk,
		set: expression.Set(expression.Name("wstatus"), expression.Value(string(WorkerDraining))),
		cond: expression.Name("leases").LessThanEqual(expression.Value(0)).
			And(expression.Name("wstatus").NotEqual(expression.Value(string(WorkerRevoked)))),
	})
	if errors.Is(err, errConditionFailed) {
		return fmt.Errorf("worker %s has a lease or is gone: %w", id, ErrConflict)
	}
	return err
}

// RotateWorkerToken replaces a worker's token digest; the old token stops working.
func (s *Store) RotateWorkerToken(ctx context.Context, id, tokenHash string) (Worker, error) {
	return s.setWorker(ctx, id, expression.Set(expression.Name("token_hash"), expression.Value(tokenHash)),
		expression.Name("wstatus").NotEqual(expression.Value(string(WorkerRevoked))))
}

func (s *Store) setWorker(ctx context.Context, id string, set expression.UpdateBuilder, extra expression.ConditionBuilder) (Worker, error) {
	pk, sk := workerKey(id)
	cond := expression.AttributeExists(expression.Name(AttrPK))
	if extra.IsSet() {
		cond = cond.And(extra)
	}
	err := s.updateItem(ctx, update{pk: pk, sk: sk, set: set, cond: cond})
	if errors.Is(err, errConditionFailed) {
		w, gerr := s.GetWorker(ctx, id)
		if gerr != nil {
			return Worker{}, gerr
		}
		return w, fmt.Errorf("worker %s is %s: %w", id, w.Status, ErrConflict)
	}
	if err != nil {
		return Worker{}, err
	}
	return s.GetWorker(ctx, id)
}

// RevokeWorker marks a worker revoked (its token stops working) and gives
// every lease it holds back to the queue without spending an attempt.
func (s *Store) RevokeWorker(ctx context.Context, id string) (Worker, error) {
	w, err := s.setWorker(ctx, id, expression.Set(expression.Name("wstatus"), expression.Value(string(WorkerRevoked))), expression.ConditionBuilder{})
	if err != nil {
		return w, err
	}
	if _, err := s.requeueWorkerLeases(ctx, w, job.ReasonWorkerGone); err != nil {
		return w, err
	}
	return s.GetWorker(ctx, id)
}

// DeregisterWorker requeues every lease the worker holds (no attempt spent),
// then deletes it; its token stops working.
func (s *Store) DeregisterWorker(ctx context.Context, a WorkerAuth) error {
	w, err := s.Authorize(ctx, a)
	if err != nil {
		return err
	}
	if _, err := s.requeueWorkerLeases(ctx, w, job.ReasonDeregistered); err != nil {
		return err
	}
	return s.deleteWorker(ctx, w, authCond(a))
}

// RemoveWorker requeues a worker's leases and deletes it, whatever its token
// (the instance is gone). It answers ErrNotFound when there is no such worker.
func (s *Store) RemoveWorker(ctx context.Context, id, reason string) (requeued int, err error) {
	w, err := s.GetWorker(ctx, id)
	if err != nil {
		return 0, err
	}
	n, err := s.requeueWorkerLeases(ctx, w, reason)
	if err != nil {
		return n, err
	}
	return n, s.deleteWorker(ctx, w, expression.AttributeExists(expression.Name(AttrPK)))
}

func (s *Store) deleteWorker(ctx context.Context, w Worker, cond expression.ConditionBuilder) error {
	pk, sk := workerKey(w.ID)
	fpk, fsk := fleetKey(w.Fleet)
	err := s.transact(ctx,
		txItem{delete: &update{pk: pk, sk: sk, cond: cond}},
		txItem{update: &update{pk: fpk, sk: fsk,
			set:  expression.Add(expression.Name("workers"), expression.Value(-1)),
			cond: expression.Name("workers").GreaterThan(expression.Value(0)),
		}},
	)
	var tf *txFailed
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tf) && tf.failedAt(0):
		_, aerr := s.GetWorker(ctx, w.ID)
		if errors.Is(aerr, ErrNotFound) {
			return nil // already gone
		}
		return ErrUnauthenticated
	case errors.As(err, &tf) && tf.failedAt(1):
		// The fleet counter is already zero (it drifted); delete the worker alone.
		_, derr := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk)})
		return derr
	default:
		return fmt.Errorf("delete worker %s: %w", w.ID, err)
	}
}
