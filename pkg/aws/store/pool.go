package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// The stopped Spot pool (docs/data-model.md, "The Spot pool's items").
// Each pool instance is one item beside its fleet's state,
// FLEET#<slug> / POOL#<instance id>, and each pair avoided after a failed
// start one more, FLEET#<slug> / POOLAVOID#<type>#<zone>: one Query of the
// fleet's partition from "POOL" reads both. Every change of an instance's
// state is one UpdateItem conditioned on the states it may come from
// (poolFrom), so two wakes never start the same stopped instance and an
// instance is never stopped unless it runs.

// Pool instance states, by their domain names.
const (
	PoolPreparing   = scaling.PoolPreparing
	PoolStopped     = scaling.PoolStopped
	PoolStarting    = scaling.PoolStarting
	PoolRunning     = scaling.PoolRunning
	PoolStopping    = scaling.PoolStopping
	PoolInterrupted = scaling.PoolInterrupted
	PoolGone        = scaling.PoolGone
)

// poolFrom is, for each state, the states an instance may move to it from:
// the condition of the move.
var poolFrom = map[scaling.PoolState][]scaling.PoolState{
	// A start claims a stopped instance: one claim wins.
	PoolStarting: {PoolStopped},
	// Started (its agent runs), or brought back by EC2 after an
	// interruption.
	PoolRunning: {PoolStarting, PoolInterrupted},
	// Stopped back into the pool only while it runs.
	PoolStopping: {PoolRunning},
	// Prepared, a failed start (the instance stayed stopped), or the stop
	// done.
	PoolStopped: {PoolPreparing, PoolStarting, PoolStopping},
	// EC2 stopped it: only EC2 restarts it.
	PoolInterrupted: {PoolPreparing, PoolStopped, PoolStarting, PoolRunning, PoolStopping},
}

const (
	prefixPool      = "POOL#"
	prefixPoolAvoid = "POOLAVOID#"
	// poolPartitionStart begins the sort key of every pool item.
	poolPartitionStart = "POOL"

	attrPoolState = "pstate"
	attrSinceMS   = "since_ms"
	attrStartFor  = "start_for"
	attrUntilMS   = "until_ms"
)

func poolKey(fleet, instanceID string) (string, string) {
	return prefixFleet + fleet, prefixPool + instanceID
}

func poolAvoidKey(fleet, instanceType, zone string) (string, string) {
	return prefixFleet + fleet, prefixPoolAvoid + instanceType + "#" + zone
}

type poolItem struct {
	PK           string `dynamodbav:"PK"`
	SK           string `dynamodbav:"SK"`
	Type         string `dynamodbav:"type"`
	Fleet        string `dynamodbav:"fleet"`
	InstanceID   string `dynamodbav:"instance_id,omitempty"`
	InstanceType string `dynamodbav:"instance_type"`
	AZ           string `dynamodbav:"az"`
	State        string `dynamodbav:"pstate,omitempty"`
	SinceMS      int64  `dynamodbav:"since_ms,omitempty"`
	CreatedMS    int64  `dynamodbav:"created_ms,omitempty"`
	StartFor     int    `dynamodbav:"start_for"`
	UntilMS      int64  `dynamodbav:"until_ms,omitempty"`
	TTL          int64  `dynamodbav:"ttl,omitempty"`
}

const (
	typePoolInstance = "pool_instance"
	typePoolAvoid    = "pool_avoid"
)

func (it poolItem) instance() scaling.PoolInstance {
	return scaling.PoolInstance{ID: it.InstanceID, Pair: scaling.Pair{InstanceType: it.InstanceType, Zone: it.AZ}, State: scaling.PoolState(it.State),
		Since: fromMS(it.SinceMS), Created: fromMS(it.CreatedMS), StartFor: it.StartFor}
}

// AddPoolInstance records a pool instance just launched, in state
// preparing (or the state p names). An instance already recorded is
// ErrConflict and stays as it is.
func (s *Store) AddPoolInstance(ctx context.Context, fleet string, p scaling.PoolInstance) error {
	if fleet == "" || p.ID == "" || p.Pair.InstanceType == "" || p.Pair.Zone == "" {
		return errors.New("add pool instance: fleet, instance id, type and zone are required")
	}
	if p.State == "" {
		p.State = PoolPreparing
	}
	if p.Since.IsZero() {
		p.Since = s.clock.Now()
	}
	if p.Created.IsZero() {
		p.Created = p.Since
	}
	pk, sk := poolKey(fleet, p.ID)
	av, err := attributevalue.MarshalMap(poolItem{PK: pk, SK: sk, Type: typePoolInstance, Fleet: fleet, InstanceID: p.ID,
		InstanceType: p.Pair.InstanceType, AZ: p.Pair.Zone, State: string(p.State), SinceMS: ms(p.Since), CreatedMS: ms(p.Created), StartFor: p.StartFor})
	if err != nil {
		return fmt.Errorf("encode pool instance: %w", err)
	}
	e, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))).Build()
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	if isConditionFailed(err) {
		return fmt.Errorf("pool instance %s of fleet %s is recorded already: %w", p.ID, fleet, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("add pool instance %s of fleet %s: %w", p.ID, fleet, err)
	}
	return nil
}

// MovePoolInstance moves a pool instance to state `to` at `at`, on the
// condition that it is in one of the states it may come from (poolFrom):
// a start claims a stopped instance (two claims: one wins), a stop takes
// a running one only, an interruption any live one. startFor is kept with
// a move to starting and cleared by any other. A move the condition
// refuses (or of an instance not recorded) is ErrConflict and writes
// nothing.
func (s *Store) MovePoolInstance(ctx context.Context, fleet, instanceID string, to scaling.PoolState, at time.Time, startFor int) error {
	from, ok := poolFrom[to]
	if !ok {
		return fmt.Errorf("move pool instance %s to %q: no such move", instanceID, to)
	}
	if to != PoolStarting {
		startFor = 0
	}
	if to == PoolRunning {
		// A started instance keeps what its start was for.
		startFor = -1
	}
	set := expression.Set(expression.Name(attrPoolState), expression.Value(string(to))).
		Set(expression.Name(attrSinceMS), expression.Value(ms(at)))
	if startFor >= 0 {
		set = set.Set(expression.Name(attrStartFor), expression.Value(startFor))
	}
	pk, sk := poolKey(fleet, instanceID)
	err := s.updateItem(ctx, update{pk: pk, sk: sk, set: set, cond: stateIn(from)})
	if errors.Is(err, errConditionFailed) {
		return fmt.Errorf("pool instance %s of fleet %s may not become %s (it is not %s): %w",
			instanceID, fleet, to, joinStates(from), ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("move pool instance %s of fleet %s to %s: %w", instanceID, fleet, to, err)
	}
	return nil
}

// stateIn is the condition that a pool item's state is one of states.
func stateIn(states []scaling.PoolState) expression.ConditionBuilder {
	ops := make([]expression.OperandBuilder, 0, len(states)-1)
	for _, st := range states[1:] {
		ops = append(ops, expression.Value(string(st)))
	}
	return expression.Name(attrPoolState).In(expression.Value(string(states[0])), ops...)
}

func joinStates(states []scaling.PoolState) string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return strings.Join(out, " or ")
}

// EndPoolInstance forgets a pool instance whose Spot request was canceled
// and that was terminated, on the condition that it is still in the state
// its caller read (state): an instance that moved meanwhile (a start
// claimed it) is ErrConflict and stays. Ending one not recorded is not an
// error. The caller makes sure no job runs there: a stopped, preparing or
// interrupted instance runs none, and a started one is ended only once its
// workers are drained idle (they never lease again).
func (s *Store) EndPoolInstance(ctx context.Context, fleet, instanceID string, state scaling.PoolState) error {
	pk, sk := poolKey(fleet, instanceID)
	cond := expression.AttributeNotExists(expression.Name(AttrPK)).Or(expression.Name(attrPoolState).Equal(expression.Value(string(state))))
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return err
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
	if isConditionFailed(err) {
		return fmt.Errorf("pool instance %s of fleet %s is no longer %s: %w", instanceID, fleet, state, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("end pool instance %s of fleet %s: %w", instanceID, fleet, err)
	}
	return nil
}

// AvoidPoolPair records that the fleet's pair (instance type, zone) is not
// to be started until `until` (a start failed there for capacity). The
// item lapses by TTL a day after.
func (s *Store) AvoidPoolPair(ctx context.Context, fleet string, p scaling.Pair, until time.Time) error {
	pk, sk := poolAvoidKey(fleet, p.InstanceType, p.Zone)
	av, err := attributevalue.MarshalMap(poolItem{PK: pk, SK: sk, Type: typePoolAvoid, Fleet: fleet, InstanceType: p.InstanceType, AZ: p.Zone,
		UntilMS: ms(until), TTL: until.Add(24 * time.Hour).Unix()})
	if err != nil {
		return fmt.Errorf("encode avoided pair: %w", err)
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}); err != nil {
		return fmt.Errorf("avoid pool pair %s of fleet %s: %w", p, fleet, err)
	}
	return nil
}

// ReadPool reads a fleet's pool: its instances (by id) and the pairs
// avoided now, until when, with one strongly consistent Query of the
// fleet's partition from its first pool item.
func (s *Store) ReadPool(ctx context.Context, fleet string) ([]scaling.PoolInstance, scaling.Avoided, error) {
	pk := prefixFleet + fleet
	items, err := queryItems[poolItem](ctx, s, query{what: "pool of " + fleet, consistent: true,
		key: expression.Key(AttrPK).Equal(expression.Value(pk)).And(expression.Key(AttrSK).BeginsWith(poolPartitionStart))})
	if err != nil {
		return nil, nil, err
	}
	now := s.clock.Now()
	var pool []scaling.PoolInstance
	avoided := scaling.Avoided{}
	for _, it := range items {
		switch {
		case strings.HasPrefix(it.SK, prefixPool):
			pool = append(pool, it.instance())
		case strings.HasPrefix(it.SK, prefixPoolAvoid):
			if until := fromMS(it.UntilMS); until.After(now) {
				avoided[scaling.Pair{InstanceType: it.InstanceType, Zone: it.AZ}] = until
			}
		}
	}
	slices.SortFunc(pool, func(a, b scaling.PoolInstance) int { return strings.Compare(a.ID, b.ID) })
	return pool, avoided, nil
}

// PoolInstanceOf reads one pool instance of a fleet (strongly consistent);
// found is false when the fleet has no such pool instance.
func (s *Store) PoolInstanceOf(ctx context.Context, fleet, instanceID string) (scaling.PoolInstance, bool, error) {
	pk, sk := poolKey(fleet, instanceID)
	var it poolItem
	found, err := s.getItem(ctx, pk, sk, &it)
	if err != nil || !found {
		return scaling.PoolInstance{}, false, err
	}
	return it.instance(), true, nil
}

// FindPoolInstance finds which fleet's pool an instance is in, reading
// each fleet of the config that has a spot_pool (one GetItem each); found is
// false when it is in none.
func (s *Store) FindPoolInstance(ctx context.Context, instanceID string) (string, scaling.PoolInstance, bool, error) {
	for _, f := range s.cfg.Fleets {
		if !f.SpotPool.Enabled() {
			continue
		}
		p, found, err := s.PoolInstanceOf(ctx, f.Slug, instanceID)
		if err != nil || found {
			return f.Slug, p, found, err
		}
	}
	return "", scaling.PoolInstance{}, false, nil
}

// RecordPoolDecision records one decision about the fleet's Spot pool (a
// start, a failed start and its fallback, a stop, an end, a refill) in the
// fleet's history with its reason; the recorded desired capacity stays as
// it is (the pool is outside the groups). Like every decision record it is
// written on the condition that no other decision came in between.
func (s *Store) RecordPoolDecision(ctx context.Context, fleet string, reason scaling.Reason) error {
	return s.appendDecision(ctx, fleet, "pool decision", func(it fleetItem) fleetstate.Decision {
		return fleetstate.Decision{At: s.clock.Now(), Desired: it.Desired, Reason: reason, InService: it.InService}
	})
}
