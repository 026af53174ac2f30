package store

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// RegisterWorker creates the worker, or, when it exists, replaces its token
// and details while keeping its leases. New workers count against the fleet's
// worker cap (ErrFleetFull past it); a worker registered to another fleet is
// ErrConflict.
func (s *Store) RegisterWorker(ctx context.Context, r Registration) (worker.Worker, error) {
	f, err := s.fleet(r.Fleet)
	if err != nil {
		return worker.Worker{}, err
	}
	now := s.clock.Now()
	for range 3 {
		w, err := s.createWorker(ctx, r, f.WorkerCap, !f.RequireApproval, now)
		if err == nil || !errors.Is(err, errExists) {
			return w, err
		}
		w, err = s.reregisterWorker(ctx, r, f.RequireApproval, now.Add(-3*f.HeartbeatInterval()), now)
		if err == nil || !errors.Is(err, ErrNotFound) {
			return w, err
		}
		// Deregistered between the two writes: create it again.
	}
	return worker.Worker{}, fmt.Errorf("register worker %s: %w", r.WorkerID, ErrContention)
}

var errExists = errors.New("already exists")

func (s *Store) createWorker(ctx context.Context, r Registration, workerCap int, approved bool, now time.Time) (worker.Worker, error) {
	pk, sk := workerKey(r.WorkerID)
	it := workerItem{
		PK: pk, SK: sk, Type: typeWorker,
		GSI1PK: s.shardFor(prefixWorkers, r.Fleet, r.WorkerID), GSI1SK: r.WorkerID,
		WorkerID: r.WorkerID, Fleet: r.Fleet, Stage: r.Stage,
		InstanceID: r.InstanceID, InstanceType: r.InstanceType, AZ: r.AZ, Purchase: r.PurchaseOption,
		Capabilities: string(r.Capabilities), Providers: r.Providers,
		MaxConcurrency: r.MaxConcurrency, TokenHash: r.TokenHash,
		Status: string(worker.Active), Approved: approved,
		RegisteredMS: ms(now), LastSeenMS: ms(now), SourceIP: r.SourceIP, AgentKeyHash: r.AgentKeyHash, AgentVersion: r.AgentVersion,
		BootLaunchMS: msOrZero(r.Boot.LaunchedAt), BootAgentMS: msOrZero(r.Boot.AgentStartedAt), BootReadyMS: msOrZero(r.Boot.RunnerReadyAt),
		BootWarmMS: msOrZero(r.Boot.WarmedUpAt), BootFromPool: r.Boot.FromPool, BootSpotPool: r.Boot.SpotPool,
	}
	if r.InstanceID != "" {
		it.GSI2PK, it.GSI2SK = instancePartition(r.InstanceID), r.WorkerID
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return worker.Worker{}, fmt.Errorf("encode worker: %w", err)
	}
	fpk, fsk := fleetKey(r.Fleet)
	count := expression.Name(attrWorkers)
	err = s.transact(ctx,
		txItem{name: memberWorker, put: av, putIf: expression.AttributeNotExists(expression.Name(AttrPK))},
		txItem{name: memberFleet, update: &update{
			pk: fpk, sk: fsk,
			set:  expression.Add(count, expression.Value(1)).Set(expression.Name(attrFleet), expression.Value(r.Fleet)),
			cond: expression.Or(count.AttributeNotExists(), count.LessThan(expression.Value(workerCap))),
		}},
	)
	var tf *txFailed
	switch {
	case err == nil:
		return it.toWorker(), nil
	case errors.As(err, &tf) && tf.failed(memberWorker):
		return worker.Worker{}, errExists
	case errors.As(err, &tf) && tf.failed(memberFleet):
		return worker.Worker{}, fmt.Errorf("fleet %s has %d workers: %w", r.Fleet, workerCap, ErrFleetFull)
	default:
		return worker.Worker{}, fmt.Errorf("create worker %s: %w", r.WorkerID, err)
	}
}

// reregisterWorker replaces an existing worker's token and details (the
// leases it holds move to the new token: replaceToken). A
// registration seen after liveSince with another agent key belongs to
// another agent and is not replaced. Approval belongs to the agent key it
// was given to: when another key (or none) takes the worker id over, a fleet
// that requires approval needs it again.
func (s *Store) reregisterWorker(ctx context.Context, r Registration, requireApproval bool, liveSince, now time.Time) (worker.Worker, error) {
	pk, sk := workerKey(r.WorkerID)
	set := expression.Set(expression.Name(attrTokenHash), expression.Value(r.TokenHash)).
		Set(expression.Name(attrStage), expression.Value(r.Stage)).
		Set(expression.Name(attrMaxConcurrency), expression.Value(r.MaxConcurrency)).
		Set(expression.Name(attrLastSeenMS), expression.Value(ms(now))).
		Set(expression.Name(attrSourceIP), expression.Value(r.SourceIP)).
		Set(expression.Name(attrAgentVersion), expression.Value(r.AgentVersion))
	if r.InstanceID != "" {
		set = set.Set(expression.Name(attrInstanceID), expression.Value(r.InstanceID)).
			Set(expression.Name(AttrGSI2PK), expression.Value(instancePartition(r.InstanceID))).
			Set(expression.Name(AttrGSI2SK), expression.Value(r.WorkerID))
	}
	if r.InstanceType != "" {
		set = set.Set(expression.Name(attrInstanceType), expression.Value(r.InstanceType))
	}
	if r.AZ != "" {
		set = set.Set(expression.Name(attrAZ), expression.Value(r.AZ))
	}
	if r.PurchaseOption != "" {
		set = set.Set(expression.Name(attrPurchase), expression.Value(r.PurchaseOption))
	}
	if len(r.Capabilities) > 0 {
		set = set.Set(expression.Name(attrCapabilities), expression.Value(string(r.Capabilities)))
	}
	if len(r.Providers) > 0 {
		set = set.Set(expression.Name(attrProviders), expression.Value(r.Providers))
	}
	// A registration again (the same agent restarting) reports its own
	// boot; the worker's registration time stays its first (it is the idle
	// clock of a worker that never leased).
	for _, b := range []struct {
		name string
		at   time.Time
	}{{attrBootLaunchMS, r.Boot.LaunchedAt}, {attrBootAgentMS, r.Boot.AgentStartedAt}, {attrBootReadyMS, r.Boot.RunnerReadyAt}, {attrBootWarmMS, r.Boot.WarmedUpAt}} {
		set = set.Set(expression.Name(b.name), expression.Value(msOrZero(b.at)))
	}
	set = set.Set(expression.Name(attrBootFromPool), expression.Value(r.Boot.FromPool)).
		Set(expression.Name(attrBootSpotPool), expression.Value(r.Boot.SpotPool))
	exists := expression.AttributeExists(expression.Name(AttrPK)).And(expression.Name(attrFleet).Equal(expression.Value(r.Fleet)))
	err := errConditionFailed
	if r.AgentKeyHash != "" {
		// The same agent (restarting, or its token lost): one write, and
		// the approval stays.
		err = s.replaceToken(ctx, r.WorkerID, r.TokenHash, set,
			exists.And(expression.Name(attrAgentKeyHash).Equal(expression.Value(r.AgentKeyHash))))
	}
	if errors.Is(err, errConditionFailed) {
		// Another agent: it may take over a keyless or quiet registration,
		// and its approval starts over.
		takeover := set
		if r.AgentKeyHash != "" {
			takeover = takeover.Set(expression.Name(attrAgentKeyHash), expression.Value(r.AgentKeyHash))
		} else {
			takeover = takeover.Remove(expression.Name(attrAgentKeyHash))
		}
		if requireApproval {
			takeover = takeover.Set(expression.Name(attrApproved), expression.Value(false))
		}
		// A worker holding a lease is live however long ago it was last
		// seen: its heartbeats write only its jobs (report.go), and the
		// lease runs out, giving the count back, when they stop.
		idle := expression.AttributeNotExists(expression.Name(attrLeases)).Or(expression.Name(attrLeases).LessThanEqual(expression.Value(0)))
		quiet := expression.AttributeNotExists(expression.Name(attrAgentKeyHash)).
			Or(expression.Name(attrLastSeenMS).LessThan(expression.Value(ms(liveSince))).And(idle))
		err = s.replaceToken(ctx, r.WorkerID, r.TokenHash, takeover, exists.And(quiet))
	}
	if errors.Is(err, errConditionFailed) {
		var cur workerItem
		found, gerr := s.getItem(ctx, pk, sk, &cur)
		switch {
		case gerr != nil:
			return worker.Worker{}, gerr
		case !found:
			return worker.Worker{}, ErrNotFound
		case cur.Fleet != r.Fleet:
			return worker.Worker{}, fmt.Errorf("worker %s is registered to fleet %s; deregister it first: %w", r.WorkerID, cur.Fleet, ErrConflict)
		case cur.Leases > 0:
			return worker.Worker{}, fmt.Errorf("worker id %s is registered by another agent, which holds %d leases; give each agent its own worker id (fleetq worker --slot or --worker-id): %w",
				r.WorkerID, cur.Leases, ErrConflict)
		default:
			return worker.Worker{}, fmt.Errorf("worker id %s is registered by another agent, last seen %s ago; give each agent its own worker id (fleetq worker --slot or --worker-id): %w",
				r.WorkerID, now.Sub(fromMS(cur.LastSeenMS)).Round(time.Second), ErrConflict)
		}
	}
	if err != nil {
		return worker.Worker{}, err
	}
	return s.GetWorker(ctx, r.WorkerID)
}

// GetWorker reads a worker (strongly consistent).
func (s *Store) GetWorker(ctx context.Context, id string) (worker.Worker, error) {
	pk, sk := workerKey(id)
	var it workerItem
	found, err := s.getItem(ctx, pk, sk, &it)
	if err != nil {
		return worker.Worker{}, err
	}
	if !found {
		return worker.Worker{}, fmt.Errorf("worker %s: %w", id, ErrNotFound)
	}
	return it.toWorker(), nil
}

// Authorize checks a worker's token digest against the stored one (in
// constant time) and that it is not revoked.
func (s *Store) Authorize(ctx context.Context, a WorkerAuth) (worker.Worker, error) {
	w, err := s.GetWorker(ctx, a.WorkerID)
	if errors.Is(err, ErrNotFound) {
		return worker.Worker{}, ErrUnauthenticated
	}
	if err != nil {
		return worker.Worker{}, err
	}
	if w.Fleet != a.Fleet || subtle.ConstantTimeCompare([]byte(w.TokenHash), []byte(a.TokenHash)) != 1 {
		return worker.Worker{}, ErrUnauthenticated
	}
	if w.Status == worker.Revoked {
		return worker.Worker{}, ErrRevoked
	}
	return w, nil
}

// authCond is the condition every worker-initiated write puts on the worker
// item: this token, and not revoked.
func authCond(a WorkerAuth) expression.ConditionBuilder {
	return expression.Name(attrTokenHash).Equal(expression.Value(a.TokenHash)).
		And(expression.Name(attrWorkerStatus).NotEqual(expression.Value(string(worker.Revoked))))
}

// TouchWorker marks a worker seen (an empty poll), checking its token.
//
// last_seen_ms is projected into the fleet's workers partition of the
// by-state index, so each write of it is a write on that one partition key
// of the fleet, and every idle worker polls every few seconds. An empty poll
// therefore writes it only when it is at least a heartbeat interval old:
// the write's condition says so, and a poll that finds the worker seen more
// recently writes nothing (a refused conditional write costs one write unit
// on the worker's own item and none in the index). The item as it was comes
// back with the refusal, so telling "seen recently" from "bad token or
// revoked" costs no read. The scaler calls a worker unresponsive after
// three heartbeat intervals unseen (scaling.Settings), which an idle
// worker's last_seen_ms, at most a heartbeat interval and a poll interval
// old, stays well within.
func (s *Store) TouchWorker(ctx context.Context, a WorkerAuth) error {
	f, err := s.fleet(a.Fleet)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	pk, sk := workerKey(a.WorkerID)
	seen := expression.Name(attrLastSeenMS)
	stale := expression.Or(expression.AttributeNotExists(seen), seen.LessThanEqual(expression.Value(ms(now.Add(-f.HeartbeatInterval())))))
	e, err := update{pk: pk, sk: sk, set: expression.Set(seen, expression.Value(ms(now))), cond: authCond(a).And(stale)}.build()
	if err != nil {
		return fmt.Errorf("build touch of worker %s: %w", a.WorkerID, err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 key(pk, sk),
		UpdateExpression:                    e.Update(),
		ConditionExpression:                 e.Condition(),
		ExpressionAttributeNames:            e.Names(),
		ExpressionAttributeValues:           e.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		if err != nil {
			return fmt.Errorf("touch worker %s: %w", a.WorkerID, err)
		}
		return nil
	}
	var it workerItem
	if len(ccf.Item) > 0 && attributevalue.UnmarshalMap(ccf.Item, &it) == nil {
		w := it.toWorker()
		if w.Fleet == a.Fleet && w.Status != worker.Revoked && subtle.ConstantTimeCompare([]byte(w.TokenHash), []byte(a.TokenHash)) == 1 {
			return nil // seen recently
		}
	}
	// No item came back (or the worker may not poll): the read says why.
	if _, aerr := s.Authorize(ctx, a); aerr != nil {
		return aerr
	}
	return nil
}

// ListWorkers returns the workers of a fleet, by worker id. It reads every
// shard of the fleet's workers partition, at once.
func (s *Store) ListWorkers(ctx context.Context, fleet string) ([]worker.Worker, error) {
	got, err := eachShard(s.shardPartitions(prefixWorkers, fleet), func(p string) ([]workerItem, error) {
		return queryItems[workerItem](ctx, s, byState(p))
	})
	if err != nil {
		return nil, err
	}
	out := make([]worker.Worker, 0)
	for _, items := range got {
		for i := range items {
			out = append(out, items[i].toWorker())
		}
	}
	if len(got) > 1 {
		slices.SortFunc(out, func(a, b worker.Worker) int { return strings.Compare(a.ID, b.ID) })
	}
	return out, nil
}

// SetWorkerApproved approves a worker (or withdraws approval).
func (s *Store) SetWorkerApproved(ctx context.Context, id string, approved bool) (worker.Worker, error) {
	return s.setWorker(ctx, id, expression.Set(expression.Name(attrApproved), expression.Value(approved)), expression.ConditionBuilder{})
}

// DrainWorker stops a worker from taking new leases; its running jobs go on.
func (s *Store) DrainWorker(ctx context.Context, id string) (worker.Worker, error) {
	return s.setWorker(ctx, id, expression.Set(expression.Name(attrWorkerStatus), expression.Value(string(worker.Draining))),
		expression.Name(attrWorkerStatus).NotEqual(expression.Value(string(worker.Revoked))))
}

// MarkWorkerUnhealthy requeues every lease the worker holds (no attempt
// spent) and marks it unhealthy: it takes no new work and, once idle, the
// scaler replaces its instance.
func (s *Store) MarkWorkerUnhealthy(ctx context.Context, a WorkerAuth) (worker.Worker, error) {
	w, err := s.Authorize(ctx, a)
	if err != nil {
		return worker.Worker{}, err
	}
	if _, err := s.requeueWorkerLeases(ctx, w, job.ReasonDeregistered); err != nil {
		return worker.Worker{}, err
	}
	w, err = s.setWorker(ctx, a.WorkerID, expression.Set(expression.Name(attrWorkerStatus), expression.Value(string(worker.Unhealthy))), authCond(a))
	if errors.Is(err, ErrConflict) {
		// Refused: the token may have been replaced since it was checked.
		if _, aerr := s.Authorize(ctx, a); aerr != nil {
			return worker.Worker{}, aerr
		}
	}
	return w, err
}

// DrainIdleWorker marks a worker draining only while it holds no lease. It is
// how scale-in claims a victim: the same item carries the lease count that
// every claim increments in its transaction, so a victim either had no lease
// and can never get one, or the drain fails.
func (s *Store) DrainIdleWorker(ctx context.Context, id string) error {
	pk, sk := workerKey(id)
	err := s.updateItem(ctx, update{pk: pk, sk: sk,
		set: expression.Set(expression.Name(attrWorkerStatus), expression.Value(string(worker.Draining))),
		cond: expression.Name(attrLeases).LessThanEqual(expression.Value(0)).
			And(expression.Name(attrWorkerStatus).NotEqual(expression.Value(string(worker.Revoked)))),
	})
	if errors.Is(err, errConditionFailed) {
		return fmt.Errorf("worker %s has a lease or is gone: %w", id, ErrConflict)
	}
	return err
}

func (s *Store) setWorker(ctx context.Context, id string, set expression.UpdateBuilder, extra expression.ConditionBuilder) (worker.Worker, error) {
	pk, sk := workerKey(id)
	cond := expression.AttributeExists(expression.Name(AttrPK))
	if extra.IsSet() {
		cond = cond.And(extra)
	}
	return s.workerAfter(ctx, id, s.updateItem(ctx, update{pk: pk, sk: sk, set: set, cond: cond}))
}

// workerAfter answers the worker as a conditional write of it (err) left it:
// a refused condition is ErrConflict naming the status the worker is in.
func (s *Store) workerAfter(ctx context.Context, id string, err error) (worker.Worker, error) {
	if errors.Is(err, errConditionFailed) {
		w, gerr := s.GetWorker(ctx, id)
		if gerr != nil {
			return worker.Worker{}, gerr
		}
		return w, fmt.Errorf("worker %s is %s: %w", id, w.Status, ErrConflict)
	}
	if err != nil {
		return worker.Worker{}, err
	}
	return s.GetWorker(ctx, id)
}

// RevokeWorker marks a worker revoked (its token stops working) and gives
// every lease it holds back to the queue without spending an attempt.
func (s *Store) RevokeWorker(ctx context.Context, id string) (worker.Worker, error) {
	w, err := s.setWorker(ctx, id, expression.Set(expression.Name(attrWorkerStatus), expression.Value(string(worker.Revoked))), expression.ConditionBuilder{})
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
func (s *Store) RemoveWorker(ctx context.Context, id string, reason job.Reason) (requeued int, err error) {
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

func (s *Store) deleteWorker(ctx context.Context, w worker.Worker, cond expression.ConditionBuilder) error {
	pk, sk := workerKey(w.ID)
	fpk, fsk := fleetKey(w.Fleet)
	err := s.transact(ctx,
		txItem{name: memberWorker, delete: &update{pk: pk, sk: sk, cond: cond}},
		txItem{name: memberFleet, update: &update{pk: fpk, sk: fsk,
			set:  expression.Add(expression.Name(attrWorkers), expression.Value(-1)),
			cond: expression.Name(attrWorkers).GreaterThan(expression.Value(0)),
		}},
	)
	var tf *txFailed
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tf) && tf.failed(memberWorker):
		_, aerr := s.GetWorker(ctx, w.ID)
		if errors.Is(aerr, ErrNotFound) {
			return nil // already gone
		}
		return ErrUnauthenticated
	case errors.As(err, &tf) && tf.failed(memberFleet):
		// The fleet counter is already zero (it drifted); delete the worker alone.
		_, derr := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk)})
		return derr
	default:
		return fmt.Errorf("delete worker %s: %w", w.ID, err)
	}
}

// LeaseCountQuiet is how long a worker must have made no claim before its
// lease count may be reconciled from the index: long past any index lag, so
// a claim the index has not shown yet can never be counted away.
const LeaseCountQuiet = 2 * time.Minute

// ReconcileLeaseCounts is a safety net: every lease start and end moves the
// job and its worker's count in one transaction, so counts should never
// drift; if one has (a bug, a manual edit), it is set to the leased jobs the
// index shows for the worker (held, by worker id). workers are the fleet's
// workers as the caller read them. A worker that claimed a job in the last
// LeaseCountQuiet is left alone, so index lag can never hide a fresh claim,
// and the write is conditional on the count read.
func (s *Store) ReconcileLeaseCounts(ctx context.Context, workers []worker.Worker, held map[string]int) (int, error) {
	cutoff := s.clock.Now().Add(-LeaseCountQuiet)
	fixed := 0
	for _, w := range workers {
		n := held[w.ID]
		if w.Leases == n || w.LastClaimAt.After(cutoff) {
			continue
		}
		pk, sk := workerKey(w.ID)
		err := s.updateItem(ctx, update{pk: pk, sk: sk,
			set: expression.Set(expression.Name(attrLeases), expression.Value(n)),
			cond: expression.Name(attrLeases).Equal(expression.Value(w.Leases)).
				And(expression.Name(attrLastClaimMS).LessThan(expression.Value(ms(cutoff))).
					Or(expression.AttributeNotExists(expression.Name(attrLastClaimMS)))),
		})
		if errors.Is(err, errConditionFailed) {
			continue // it moved meanwhile; the next tick looks again
		}
		if err != nil {
			return fixed, fmt.Errorf("reconcile lease count of %s: %w", w.ID, err)
		}
		s.log.Warn("worker lease count reconciled", "worker_id", w.ID, "fleet", w.Fleet, "was", w.Leases, "now", n)
		fixed++
	}
	return fixed, nil
}

// RemoveStaleWorkers removes the workers (as the caller read them) not seen
// since before cutoff; their leases, if any, are requeued first
// (RemoveWorkers). It answers the ids removed.
func (s *Store) RemoveStaleWorkers(ctx context.Context, workers []worker.Worker, cutoff time.Time) ([]string, error) {
	var stale []worker.Worker
	var ids []string
	for _, w := range workers {
		if w.LastSeenAt.IsZero() || !w.LastSeenAt.Before(cutoff) {
			continue
		}
		stale = append(stale, w)
		ids = append(ids, w.ID)
	}
	if len(stale) == 0 {
		return nil, nil
	}
	if _, err := s.RemoveWorkers(ctx, stale, job.ReasonStale); err != nil {
		return nil, err
	}
	return ids, nil
}

// RemoveIdleWorker deletes a worker the caller drained while it held no
// lease (DrainIdleWorker): it can take none, so there is nothing to requeue
// and nothing to read. A worker already gone is not an error.
func (s *Store) RemoveIdleWorker(ctx context.Context, w worker.Worker) error {
	return s.deleteWorker(ctx, w, expression.AttributeExists(expression.Name(AttrPK)))
}

// workerItem is a registered worker as stored.
type workerItem struct {
	PK     string `dynamodbav:"PK"`
	SK     string `dynamodbav:"SK"`
	GSI1PK string `dynamodbav:"GSI1PK"`
	GSI1SK string `dynamodbav:"GSI1SK"`
	GSI2PK string `dynamodbav:"GSI2PK,omitempty"`
	GSI2SK string `dynamodbav:"GSI2SK,omitempty"`
	Type   string `dynamodbav:"type"`

	WorkerID       string   `dynamodbav:"worker_id"`
	Fleet          string   `dynamodbav:"fleet"`
	Stage          string   `dynamodbav:"stage"`
	InstanceID     string   `dynamodbav:"instance_id,omitempty"`
	InstanceType   string   `dynamodbav:"instance_type,omitempty"`
	AZ             string   `dynamodbav:"az,omitempty"`
	Purchase       string   `dynamodbav:"purchase,omitempty"`
	Capabilities   string   `dynamodbav:"capabilities,omitempty"`
	Providers      []string `dynamodbav:"providers,omitempty"`
	MaxConcurrency int      `dynamodbav:"max_concurrency"`
	TokenHash      string   `dynamodbav:"token_hash"`
	Status         string   `dynamodbav:"wstatus"`
	Approved       bool     `dynamodbav:"approved"`
	Leases         int      `dynamodbav:"leases"`
	RegisteredMS   int64    `dynamodbav:"registered_ms"`
	LastSeenMS     int64    `dynamodbav:"last_seen_ms"`
	LastReleaseMS  int64    `dynamodbav:"last_release_ms,omitempty"`
	LastClaimMS    int64    `dynamodbav:"last_claim_ms,omitempty"`
	SourceIP       string   `dynamodbav:"source_ip,omitempty"`
	AgentKeyHash   string   `dynamodbav:"agent_key_hash,omitempty"`
	AgentVersion   string   `dynamodbav:"agent_version,omitempty"`
	FirstClaimMS   int64    `dynamodbav:"first_claim_ms,omitempty"`
	BootLaunchMS   int64    `dynamodbav:"boot_launch_ms,omitempty"`
	BootAgentMS    int64    `dynamodbav:"boot_agent_ms,omitempty"`
	BootReadyMS    int64    `dynamodbav:"boot_ready_ms,omitempty"`
	BootWarmMS     int64    `dynamodbav:"boot_warm_ms,omitempty"`
	BootFromPool   bool     `dynamodbav:"boot_from_pool,omitempty"`
	BootSpotPool   bool     `dynamodbav:"boot_spot_pool,omitempty"`
}

// msOrZero is a time in Unix milliseconds, 0 for the zero time.
func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return ms(t)
}

// timeOrZero is the time of Unix milliseconds, zero for 0.
func timeOrZero(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return fromMS(v)
}

func (it *workerItem) toWorker() worker.Worker {
	w := worker.Worker{
		ID:             it.WorkerID,
		Fleet:          it.Fleet,
		Stage:          it.Stage,
		InstanceID:     it.InstanceID,
		InstanceType:   it.InstanceType,
		AZ:             it.AZ,
		PurchaseOption: it.Purchase,
		Providers:      it.Providers,
		MaxConcurrency: it.MaxConcurrency,
		TokenHash:      it.TokenHash,
		Status:         worker.Status(it.Status),
		Approved:       it.Approved,
		Leases:         it.Leases,
		RegisteredAt:   fromMS(it.RegisteredMS),
		LastSeenAt:     fromMS(it.LastSeenMS),
		LastReleaseAt:  fromMS(it.LastReleaseMS),
		LastClaimAt:    fromMS(it.LastClaimMS),
		SourceIP:       it.SourceIP,
		AgentVersion:   it.AgentVersion,
		FirstClaimAt:   timeOrZero(it.FirstClaimMS),
		Boot: worker.Boot{LaunchedAt: timeOrZero(it.BootLaunchMS), AgentStartedAt: timeOrZero(it.BootAgentMS),
			RunnerReadyAt: timeOrZero(it.BootReadyMS), WarmedUpAt: timeOrZero(it.BootWarmMS), FromPool: it.BootFromPool, SpotPool: it.BootSpotPool},
	}
	if it.Capabilities != "" {
		w.Capabilities = json.RawMessage(it.Capabilities)
	}
	return w
}

// instanceCandidates reads the instance index for the workers an EC2
// instance may run: candidates only, as an index read may be stale.
func (s *Store) instanceCandidates(ctx context.Context, instanceID string) ([]workerItem, error) {
	partition := instancePartition(instanceID)
	return queryItems[workerItem](ctx, s, query{what: partition, index: IndexByInstance,
		key: expression.Key(AttrGSI2PK).Equal(expression.Value(partition))})
}

// WorkersByInstance finds every worker running on an EC2 instance (one per
// agent: several agents share an instance, one per GPU), in id order; an
// instance without workers gives none and no error. The index read only
// finds the candidates; each is then read consistently, and one that has
// gone or moved to another instance since is left out.
func (s *Store) WorkersByInstance(ctx context.Context, instanceID string) ([]worker.Worker, error) {
	cands, err := s.instanceCandidates(ctx, instanceID)
	if err != nil {
		return nil, err
	}
	var out []worker.Worker
	for _, it := range cands {
		w, err := s.GetWorker(ctx, it.WorkerID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if w.InstanceID == instanceID {
			out = append(out, w)
		}
	}
	return out, nil
}

// terminationRetention keeps a termination nobody ended past its deadline:
// long enough for any sweep to see it, short enough not to pile up.
const terminationRetention = 48 * time.Hour

type terminationItem struct {
	PK          string `dynamodbav:"PK"`
	SK          string `dynamodbav:"SK"`
	Fleet       string `dynamodbav:"fleet"`
	Group       string `dynamodbav:"asg"`
	Hook        string `dynamodbav:"hook"`
	Token       string `dynamodbav:"hook_token,omitempty"`
	StartedMS   int64  `dynamodbav:"started_ms"`
	DeadlineMS  int64  `dynamodbav:"deadline_ms"`
	HeartbeatMS int64  `dynamodbav:"heartbeat_ms"`
	TTL         int64  `dynamodbav:"ttl"`
}

func (it terminationItem) toTermination() Termination {
	return Termination{InstanceID: it.SK, Fleet: it.Fleet, Group: it.Group, Hook: it.Hook, Token: it.Token,
		StartedAt: fromMS(it.StartedMS), Deadline: fromMS(it.DeadlineMS), HeartbeatAt: fromMS(it.HeartbeatMS)}
}

// StartTermination records an instance's termination as pending. An
// instance already pending keeps its record (a redelivered event does not
// move the deadline): StartTermination answers it and false.
func (s *Store) StartTermination(ctx context.Context, t Termination) (Termination, bool, error) {
	if t.InstanceID == "" || t.Group == "" || t.Hook == "" || t.Deadline.IsZero() {
		return Termination{}, false, errors.New("start termination: instance, group, hook and deadline are required")
	}
	pk, sk := terminationKey(t.InstanceID)
	it := terminationItem{PK: pk, SK: sk, Fleet: t.Fleet, Group: t.Group, Hook: t.Hook, Token: t.Token,
		StartedMS: ms(t.StartedAt), DeadlineMS: ms(t.Deadline), HeartbeatMS: ms(t.HeartbeatAt),
		TTL: t.Deadline.Add(terminationRetention).Unix()}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return Termination{}, false, fmt.Errorf("encode termination: %w", err)
	}
	e, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))).Build()
	if err != nil {
		return Termination{}, false, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if isConditionFailed(err) {
		var cur terminationItem
		found, gerr := s.getItem(ctx, pk, sk, &cur)
		if gerr != nil {
			return Termination{}, false, gerr
		}
		if !found { // ended in between: start it again
			return s.StartTermination(ctx, t)
		}
		return cur.toTermination(), false, nil
	}
	if err != nil {
		return Termination{}, false, fmt.Errorf("start termination of %s: %w", t.InstanceID, err)
	}
	return it.toTermination(), true, nil
}

// Terminations lists the pending terminations, by instance id.
func (s *Store) Terminations(ctx context.Context) ([]Termination, error) {
	items, err := queryItems[terminationItem](ctx, s, byPartition(partitionTerminating))
	if err != nil {
		return nil, err
	}
	out := make([]Termination, 0, len(items))
	for _, it := range items {
		out = append(out, it.toTermination())
	}
	return out, nil
}

// RecordTerminationHeartbeat notes when an instance's lifecycle action was
// last heartbeated. A termination no longer pending is ErrNotFound.
func (s *Store) RecordTerminationHeartbeat(ctx context.Context, instanceID string, at time.Time) error {
	pk, sk := terminationKey(instanceID)
	err := s.updateItem(ctx, update{pk: pk, sk: sk,
		set:  expression.Set(expression.Name(attrHeartbeatMS), expression.Value(ms(at))),
		cond: expression.AttributeExists(expression.Name(AttrPK))})
	if errors.Is(err, errConditionFailed) {
		return fmt.Errorf("termination of %s: %w", instanceID, ErrNotFound)
	}
	return err
}

// EndTermination forgets an instance's pending termination (its action was
// completed, or is gone). Ending one that is not pending is not an error.
func (s *Store) EndTermination(ctx context.Context, instanceID string) error {
	pk, sk := terminationKey(instanceID)
	if _, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk)}); err != nil {
		return fmt.Errorf("end termination of %s: %w", instanceID, err)
	}
	return nil
}
