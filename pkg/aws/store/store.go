package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// DynamoDB is the part of the DynamoDB API the store uses; *dynamodb.Client
// satisfies it.
type DynamoDB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Options configure a Store.
type Options struct {
	// Table is the DynamoDB table name.
	Table string
	// Config supplies each fleet's lease, retry, preemption and cap settings.
	Config *fleetconfig.Config
	// Clock is the source of "now" for every rule (default: the wall clock).
	Clock clock.Clock
	// CandidateLimit is how many ready jobs one poll reads from the index
	// while claims are not being lost (default 100); the lease window grows
	// to four times as many, and a poll then reads as many as its window.
	CandidateLimit int
	// LeaseSpread is the narrowest lease window: how many of the oldest
	// top-priority candidates a poll picks its claim from at random when no
	// claim is being lost to other pollers (default 8; 1 gives strict
	// priority-then-age order until pollers collide). See lease.Memory.
	LeaseSpread int
	// Logger receives structured logs (default: slog.Default()).
	Logger *slog.Logger
	// CostMetrics, when set, receives one CloudWatch Embedded Metric Format
	// line per job the relay prices: CostUSD with dimensions Stage and
	// Tenant (costs.go). os.Stdout in Lambda; nil writes none.
	CostMetrics io.Writer
}

// Store is fleetq's state in DynamoDB.
type Store struct {
	db    DynamoDB
	table string
	cfg   *fleetconfig.Config
	clock clock.Clock
	log   *slog.Logger
	// costMetrics receives the per-tenant cost lines (Options.CostMetrics).
	costMetrics io.Writer

	// planner decides every lease of this process (lease.go).
	planner *lease.Planner
	// spot holds each fleet's *spotCache (spotprices.go).
	spot sync.Map
	// onDemand holds whether each worker read for an estimate registered
	// On-Demand (estimates.go): a worker's purchase option never changes.
	onDemand sync.Map
}

// New returns a store over the given table.
func New(db DynamoDB, o Options) *Store {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.CandidateLimit <= 0 {
		o.CandidateLimit = 100
	}
	if o.LeaseSpread <= 0 {
		o.LeaseSpread = 8
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Store{db: db, table: o.Table, cfg: o.Config, clock: o.Clock, log: o.Logger, costMetrics: o.CostMetrics,
		planner: newPlanner(o)}
}

// Config returns the fleet configuration the store applies.
func (s *Store) Config() *fleetconfig.Config { return s.cfg }

// Table returns the table name.
func (s *Store) Table() string { return s.table }

func (s *Store) fleet(slug string) (*fleetconfig.Fleet, error) {
	f, ok := s.cfg.Fleet(slug)
	if !ok {
		return nil, fmt.Errorf("fleet %q: %w", slug, ErrNotFound)
	}
	return f, nil
}

func (s *Store) retention() time.Duration { return s.cfg.JobRetention.Std() }

func newToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return hex.EncodeToString(b)
}

func randIntN(n int) int {
	if n <= 1 {
		return 0
	}
	return mrand.IntN(n)
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: pk},
		AttrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

// getItem reads one item with a strongly consistent read into out.
func (s *Store) getItem(ctx context.Context, pk, sk string, out any) (bool, error) {
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(pk, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, fmt.Errorf("get %s: %w", pk, err)
	}
	if res.Item == nil {
		return false, nil
	}
	if err := attributevalue.UnmarshalMap(res.Item, out); err != nil {
		return false, fmt.Errorf("decode %s: %w", pk, err)
	}
	return true, nil
}

// update is one conditional UpdateItem, usable alone or inside a transaction.
type update struct {
	pk, sk string
	set    expression.UpdateBuilder
	cond   expression.ConditionBuilder
	// event, when set, is an outbox item written in the same transaction
	// as the update (see outbox.go).
	event map[string]types.AttributeValue
	// tally, when set, is a tenant counter change written in the same
	// transaction (see tenants.go).
	tally *update
}

func (u update) build() (expression.Expression, error) {
	b := expression.NewBuilder().WithUpdate(u.set)
	if u.cond.IsSet() {
		b = b.WithCondition(u.cond)
	}
	return b.Build()
}

func (s *Store) updateItem(ctx context.Context, u update) error {
	if u.event != nil || u.tally != nil {
		// The transition and its announcement (and its tenant count) are one write.
		err := s.transact(ctx, txItem{name: memberJob, update: &u})
		var tf *txFailed
		if errors.As(err, &tf) {
			return errConditionFailed
		}
		return err
	}
	e, err := u.build()
	if err != nil {
		return fmt.Errorf("build update of %s: %w", u.pk, err)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(u.pk, u.sk),
		UpdateExpression:          e.Update(),
		ConditionExpression:       e.Condition(),
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		if isConditionFailed(err) {
			return errConditionFailed
		}
		if itemTooLargeErr(err) {
			return fmt.Errorf("update %s: %w", u.pk, ErrItemTooLarge)
		}
		return fmt.Errorf("update %s: %w", u.pk, err)
	}
	return nil
}

// txItem is one member of a write transaction. Its name says what its
// condition stands for, so that a canceled transaction says which named
// conditions failed (txFailed) rather than at which positions.
type txItem struct {
	name   string
	update *update
	put    map[string]types.AttributeValue
	putIf  expression.ConditionBuilder
	delete *update // pk/sk and cond only
	check  *update // pk/sk and cond only: a ConditionCheck
}

// Names of transaction members, by what their condition stands for.
const (
	memberJob         = "job"               // the job's state: status, lease token, partition
	memberJobAbsent   = "job absent"        // no job of that id yet
	memberLegacyJob   = "job under its key" // no job of the tenant under its key alone (stored before tenant-scoped ids)
	memberWorker      = "worker"            // the worker may act: token, status, approval, capacity
	memberLeaseSlot   = "tenant lease slot" // the tenant is under its max_leased
	memberTenantCount = "tenant open count" // the tenant is under its max_queued
	memberReservation = "reservation"       // a submission's slot reservation
	memberFleet       = "fleet state"       // the fleet's worker count
	memberEvent       = "outbox event"      // an announced transition
	memberCostTotal   = "cost total"        // an hour's cost total
	memberMarker      = "interruption seen" // an interruption event counted once
	memberBucket      = "interruption count"
)

// txFailed names the members of a canceled transaction that failed their
// condition.
type txFailed struct{ names []string }

// Error names the conditions that failed.
func (e *txFailed) Error() string {
	return "transaction canceled: the condition on " + strings.Join(e.names, ", ") + " failed"
}

// failed reports whether the named member failed its condition.
func (e *txFailed) failed(name string) bool { return slices.Contains(e.names, name) }

// only reports whether the named member alone failed its condition.
func (e *txFailed) only(name string) bool { return len(e.names) == 1 && e.names[0] == name }

// transact runs one write transaction. Its ClientRequestToken is set here,
// once, and the SDK sends it with every retry: when an answer is lost after
// the transaction committed (a reset connection, a timeout), the retry meets
// its own write and DynamoDB answers success without applying it again, so a
// claim is not reported lost while its job stays leased, and a release is
// not counted twice or answered as a lost lease. DynamoDB remembers a token
// for 10 minutes, far longer than the SDK's retries last.
func (s *Store) transact(ctx context.Context, items ...txItem) error {
	in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String(newToken())}
	var names []string
	for i, it := range items {
		if it.name == "" {
			it.name = fmt.Sprintf("member %d", i)
		}
		names = append(names, it.name)
		var tw types.TransactWriteItem
		switch {
		case it.update != nil:
			e, err := it.update.build()
			if err != nil {
				return fmt.Errorf("build update of %s: %w", it.update.pk, err)
			}
			tw.Update = &types.Update{
				TableName:                 aws.String(s.table),
				Key:                       key(it.update.pk, it.update.sk),
				UpdateExpression:          e.Update(),
				ConditionExpression:       e.Condition(),
				ExpressionAttributeNames:  e.Names(),
				ExpressionAttributeValues: e.Values(),
			}
		case it.put != nil:
			p := &types.Put{TableName: aws.String(s.table), Item: it.put}
			if it.putIf.IsSet() {
				e, err := expression.NewBuilder().WithCondition(it.putIf).Build()
				if err != nil {
					return fmt.Errorf("build put condition: %w", err)
				}
				p.ConditionExpression = e.Condition()
				p.ExpressionAttributeNames = e.Names()
				p.ExpressionAttributeValues = e.Values()
			}
			tw.Put = p
		case it.delete != nil:
			d := &types.Delete{TableName: aws.String(s.table), Key: key(it.delete.pk, it.delete.sk)}
			if it.delete.cond.IsSet() {
				e, err := expression.NewBuilder().WithCondition(it.delete.cond).Build()
				if err != nil {
					return fmt.Errorf("build delete condition: %w", err)
				}
				d.ConditionExpression = e.Condition()
				d.ExpressionAttributeNames = e.Names()
				d.ExpressionAttributeValues = e.Values()
			}
			tw.Delete = d
		case it.check != nil:
			e, err := expression.NewBuilder().WithCondition(it.check.cond).Build()
			if err != nil {
				return fmt.Errorf("build condition check of %s: %w", it.check.pk, err)
			}
			tw.ConditionCheck = &types.ConditionCheck{
				TableName: aws.String(s.table), Key: key(it.check.pk, it.check.sk),
				ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			}
		}
		in.TransactItems = append(in.TransactItems, tw)
	}
	for _, it := range items {
		if it.update != nil && it.update.event != nil {
			names = append(names, memberEvent)
			in.TransactItems = append(in.TransactItems, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: it.update.event}})
		}
	}
	for _, it := range items {
		if it.update != nil && it.update.tally != nil {
			e, err := it.update.tally.build()
			if err != nil {
				return fmt.Errorf("build tenant count: %w", err)
			}
			names = append(names, "tenant count")
			in.TransactItems = append(in.TransactItems, types.TransactWriteItem{Update: &types.Update{
				TableName: aws.String(s.table), Key: key(it.update.tally.pk, it.update.tally.sk),
				UpdateExpression: e.Update(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			}})
		}
	}
	_, err := s.db.TransactWriteItems(ctx, in)
	if err == nil {
		return nil
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		f := &txFailed{}
		for i, r := range tce.CancellationReasons {
			if tooLarge(r) {
				return fmt.Errorf("%w: %s", ErrItemTooLarge, aws.ToString(r.Message))
			}
			if i < len(names) && aws.ToString(r.Code) == "ConditionalCheckFailed" {
				f.names = append(f.names, names[i])
			}
		}
		if len(f.names) > 0 {
			return f
		}
		// Canceled for another reason (a concurrent transaction on the same
		// items, throttling): nothing was written, the caller may retry.
		return fmt.Errorf("%w: %s", ErrContention, aws.ToString(tce.Message))
	}
	return fmt.Errorf("transact: %w", err)
}

// null is a NULL attribute value. Attributes are cleared by setting them to
// NULL rather than with REMOVE: the result reads the same, TTL ignores a
// non-number, and it does not depend on emulators implementing REMOVE.
func null() expression.ValueBuilder {
	return expression.Value(&types.AttributeValueMemberNULL{Value: true})
}

var errConditionFailed = errors.New("condition failed")

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf) || errors.Is(err, errConditionFailed)
}

// query is one Query of the table or of an index, read page by page. Every
// read of more than one item goes through it.
type query struct {
	what  string // names the read in errors
	index string // "" for the table
	key   expression.KeyConditionBuilder
	// backward reads in descending sort-key order.
	backward bool
	// limit stops the read after this many items (0: read every page).
	limit      int
	consistent bool
	// filter drops items after they are read; with it, pages are read
	// whole (a Limit would count the dropped items too).
	filter *expression.ConditionBuilder
	// maxPages stops the read after this many pages (0: no bound).
	maxPages int
}

// run reads the pages of q: its items, or with count only how many there are.
func (s *Store) run(ctx context.Context, q query, count bool) ([]map[string]types.AttributeValue, int, error) {
	b := expression.NewBuilder().WithKeyCondition(q.key)
	if q.filter != nil {
		b = b.WithFilter(*q.filter)
	}
	e, err := b.Build()
	if err != nil {
		return nil, 0, fmt.Errorf("build query of %s: %w", q.what, err)
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    e.KeyCondition(),
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
		ScanIndexForward:          aws.Bool(!q.backward),
		FilterExpression:          e.Filter(),
	}
	if q.index != "" {
		in.IndexName = aws.String(q.index)
	}
	if q.consistent {
		in.ConsistentRead = aws.Bool(true)
	}
	if count {
		in.Select = types.SelectCount
	}
	var items []map[string]types.AttributeValue
	n := 0
	for page := 1; ; page++ {
		if q.limit > 0 && !count && q.filter == nil {
			in.Limit = aws.Int32(int32(q.limit - len(items)))
		}
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, 0, fmt.Errorf("query %s: %w", q.what, err)
		}
		items = append(items, res.Items...)
		n += int(res.Count)
		if len(res.LastEvaluatedKey) == 0 || (q.limit > 0 && !count && len(items) >= q.limit) || (q.maxPages > 0 && page >= q.maxPages) {
			if q.limit > 0 && len(items) > q.limit {
				items = items[:q.limit]
			}
			return items, n, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// queryItems reads the items of q decoded as T.
func queryItems[T any](ctx context.Context, s *Store, q query) ([]T, error) {
	items, _, err := s.run(ctx, q, false)
	if err != nil {
		return nil, err
	}
	var out []T
	if err := attributevalue.UnmarshalListOfMaps(items, &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", q.what, err)
	}
	return out, nil
}

// byState is the query of one IndexByState partition.
func byState(partition string) query {
	return query{what: partition, index: IndexByState, key: expression.Key(AttrGSI1PK).Equal(expression.Value(partition))}
}

// byPartition is the query of one table partition.
func byPartition(pk string) query {
	return query{what: pk, key: expression.Key(AttrPK).Equal(expression.Value(pk))}
}

// queryIndex reads up to limit items of one IndexByState partition whose sort
// key is below `below` (all when empty), in sort-key order.
func (s *Store) queryIndex(ctx context.Context, partition, below string, limit int, forward bool) ([]jobItem, error) {
	return s.queryIndexRange(ctx, partition, "", below, limit, forward)
}

// queryIndexRange reads up to limit items of one IndexByState partition
// whose sort key is at least from (when set) and below `below` (when set).
func (s *Store) queryIndexRange(ctx context.Context, partition, from, below string, limit int, forward bool) ([]jobItem, error) {
	q := byState(partition)
	switch {
	case from != "" && below != "":
		return nil, fmt.Errorf("query %s: a range needs one bound", partition)
	case from != "":
		q.key = q.key.And(expression.Key(AttrGSI1SK).GreaterThanEqual(expression.Value(from)))
	case below != "":
		q.key = q.key.And(expression.Key(AttrGSI1SK).LessThan(expression.Value(below)))
	}
	q.limit, q.backward = limit, !forward
	return queryItems[jobItem](ctx, s, q)
}

// countIndex counts the items of one IndexByState partition. Its cost is
// bounded by the partition's size, which for the live partitions (ready,
// delayed, leased) is the fleet's live backlog.
func (s *Store) countIndex(ctx context.Context, partition string) (int, error) {
	_, n, err := s.run(ctx, byState(partition), true)
	return n, err
}
