package store

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/aws/metrics"
	"github.com/fleetq/fleetq/pkg/domain/cost"
)

// Cost per job. The relay that removes a job's outcome event prices the
// job (pkg/domain/cost) from the worker of its last attempt: instance type,
// zone, purchase option and slots, at the fleet's current Spot price of the
// type in the zone (spotprices.go) or the stage's configured prices. In the same
// transaction as the removal it records cost_usd on the job and adds the
// job to its hour's cost total by tenant, fleet and workflow, so a job is
// priced and totalled once however many relays race. docs/scaling.md,
// "Cost per job", has the rule.

// costRetention keeps hourly totals for 400 days.
const costRetention = 400 * 24 * time.Hour

// costShards is how many items (and partition keys) an hour's total of one
// tenant, fleet and workflow is spread over, a job's shard the hash of its
// id: every outcome adds to its total in a transaction (2 write units), so
// one item would take a busy workflow's whole outcome rate, 2,000 units a
// second at 1,000 outcomes. Readers sum the shards; changing the count
// only moves where new jobs are added (CostsSince reads costShards of
// them, so lowering it would hide the dropped shards' totals).
const costShards = 8

// costItem is one hour's cost total of one tenant, fleet and workflow.
type costItem struct {
	PK       string `dynamodbav:"PK"`
	SK       string `dynamodbav:"SK"`
	Tenant   string `dynamodbav:"tenant_id"`
	Fleet    string `dynamodbav:"fleet"`
	Workflow string `dynamodbav:"workflow_id"`
	Jobs     int    `dynamodbav:"jobs"`
	Unpriced int    `dynamodbav:"unpriced"`
	MicroUSD int64  `dynamodbav:"micro_usd"`
}

// jobCost prices a finished job; ok is false when it cannot be priced. A
// job that never held a lease costs nothing. A Spot worker's hour costs the
// fleet's current Spot price of its instance type in its zone
// (spotprices.go), else the config's flat Spot price; an On-Demand hour
// costs the config's On-Demand price.
func (s *Store) jobCost(ctx context.Context, j *jobItem, end time.Time) (usd float64, ok bool, err error) {
	leased := cost.Leased(j.History, end)
	if leased <= 0 {
		return 0, true, nil
	}
	if j.WorkerID == "" {
		return 0, false, nil
	}
	spot, err := s.SpotPrices(ctx, j.Fleet)
	if err != nil {
		return 0, false, err
	}
	if len(s.cfg.Prices.InstanceTypes) == 0 && len(spot.USD) == 0 {
		// Neither configured prices nor Spot prices read: nothing could be
		// priced, and no worker is read.
		return 0, false, nil
	}
	pk, sk := workerKey(j.WorkerID)
	var w workerItem
	found, err := s.getItem(ctx, pk, sk, &w)
	if err != nil || !found || w.InstanceType == "" {
		return 0, false, err
	}
	p := s.cfg.Prices.InstanceTypes[w.InstanceType]
	price, ok := cost.Price{OnDemand: p.OnDemand, Spot: p.Spot}.WithSpot(spot, w.InstanceType, w.AZ, end).For(w.Purchase)
	if !ok {
		return 0, false, nil
	}
	return cost.Charge{PricePerHour: price, Slots: w.MaxConcurrency, Leased: leased, Overhead: s.cfg.Prices.Overhead}.USD(), true, nil
}

// costRecord is the writes that record a finished job's cost: cost_usd on
// the job (while it is still in the status the event announced) and its
// hour's total.
func costRecord(j *jobItem, e *eventItem, usd float64, priced bool) (jobSet, total *update) {
	pk, sk := jobKey(j.JobID)
	set := expression.Set(expression.Name(attrCostUSD), expression.Value(usd))
	if !priced {
		set = expression.Set(expression.Name(attrCostUSD), null())
	}
	jobSet = &update{pk: pk, sk: sk, set: set, cond: expression.Name(attrStatus).Equal(expression.Value(e.Status))}
	at := fromMS(e.AtMS)
	tpk, tsk := costKey(at, shardOf(j.JobID, costShards), j.Fleet, j.TenantID, j.WorkflowID)
	unpriced, micro := 0, int64(0)
	if priced {
		micro = int64(usd*1e6 + 0.5)
	} else {
		unpriced = 1
	}
	total = &update{pk: tpk, sk: tsk, set: expression.Set(expression.Name(attrTenantID), expression.Value(j.TenantID)).
		Set(expression.Name(attrFleet), expression.Value(j.Fleet)).
		Set(expression.Name(attrWorkflowID), expression.Value(j.WorkflowID)).
		Set(expression.Name(AttrTTL), expression.Value(at.Add(costRetention).Unix())).
		Add(expression.Name(attrCostJobs), expression.Value(1)).
		Add(expression.Name(attrCostUnpriced), expression.Value(unpriced)).
		Add(expression.Name(attrCostMicroUSD), expression.Value(micro))}
	return jobSet, total
}

// finishOutcome removes a published outcome event with everything that
// rides on its removal: the job's cost and hour total, and its tenant slot.
// Only the relay whose removal succeeds writes them.
func (s *Store) finishOutcome(ctx context.Context, j *jobItem, e *eventItem, usd float64, priced bool) error {
	del := txItem{name: memberEvent, delete: &update{pk: e.PK, sk: e.SK, cond: expression.AttributeExists(expression.Name(AttrPK))}}
	jobSet, total := costRecord(j, e, usd, priced)
	items := []txItem{del, {name: memberJob, update: jobSet}, {name: memberCostTotal, update: total}}
	if slot := slotAfterTerminal(e.EventType, j); slot != nil {
		items = append(items, txItem{name: memberTenantCount, update: slot})
	}
	err := s.transact(ctx, items...)
	var tf *txFailed
	switch {
	case err == nil:
		if priced {
			s.emitCost(j, e, usd)
		}
		return nil
	case errors.As(err, &tf) && tf.failed(memberEvent):
		return nil // another relay removed it, and wrote the rest
	case errors.As(err, &tf) && tf.failed(memberJob):
		// The job moved on (an operator retry): the event still goes, and
		// the slot with it; the job's next outcome is priced then.
		items = append(items[:1], items[3:]...)
		err = s.transact(ctx, items...)
		if errors.As(err, &tf) {
			return nil
		}
		return err
	default:
		return err
	}
}

// emitCost writes the per-tenant cost metric of a job this relay priced
// and totalled: one EMF line, CostUSD with dimensions Stage and Tenant,
// stamped with the outcome's time (the hour its total is in). CloudWatch
// sums the lines into each tenant's spend; a failed write is logged, the
// cost stays recorded on the job and in the totals.
func (s *Store) emitCost(j *jobItem, e *eventItem, usd float64) {
	if s.costMetrics == nil || j.TenantID == "" {
		return
	}
	at := fromMS(e.AtMS)
	if now := s.clock.Now(); now.Sub(at) > costMetricMaxDelay || at.After(now) {
		// An outcome relayed a day late is stamped now: CloudWatch refuses
		// points two weeks old, and alarms have long looked at that period.
		at = now
	}
	err := metrics.Emit(s.costMetrics, MetricsNamespace, map[string]string{"Stage": s.cfg.Stage, "Tenant": j.TenantID},
		[]metrics.Metric{{Name: "CostUSD", Unit: metrics.UnitNone, Value: usd}}, at)
	if err != nil {
		s.log.Warn("cost metric", "job_id", j.JobID, "error", err.Error())
	}
}

// MetricsNamespace is the CloudWatch namespace of fleetq's metrics.
const MetricsNamespace = "fleetq"

// costMetricMaxDelay is how old an outcome's time may be as the cost
// metric's timestamp; an older outcome is stamped with the relay's time.
const costMetricMaxDelay = 24 * time.Hour

// CostsSince totals the cost of the jobs that finished from the hour of
// since onwards, by tenant, fleet and workflow, most expensive first. It
// reads the costShards partitions of each day of the window, a day's at
// once.
func (s *Store) CostsSince(ctx context.Context, since time.Time) ([]CostGroup, error) {
	now := s.clock.Now().UTC()
	from := since.UTC().Truncate(time.Hour)
	groups := map[string]*CostGroup{}
	for day := from.Truncate(24 * time.Hour); !day.After(now); day = day.Add(24 * time.Hour) {
		qs := make([]query, costShards)
		for n := range qs {
			qs[n] = byPartition(costPartition(day, n))
			if day.Equal(from.Truncate(24 * time.Hour)) {
				qs[n].key = qs[n].key.And(expression.Key(AttrSK).GreaterThanEqual(expression.Value(costHour(from))))
			}
		}
		shards, err := eachShard(qs, func(q query) ([]costItem, error) { return queryItems[costItem](ctx, s, q) })
		if err != nil {
			return nil, err
		}
		for _, it := range slices.Concat(shards...) {
			k := it.Tenant + "\x00" + it.Fleet + "\x00" + it.Workflow
			g := groups[k]
			if g == nil {
				g = &CostGroup{Tenant: it.Tenant, Fleet: it.Fleet, Workflow: it.Workflow}
				groups[k] = g
			}
			g.Jobs += it.Jobs
			g.Unpriced += it.Unpriced
			g.USD += float64(it.MicroUSD) / 1e6
		}
	}
	out := make([]CostGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].USD != out[k].USD {
			return out[i].USD > out[k].USD
		}
		return strings.Join([]string{out[i].Tenant, out[i].Fleet, out[i].Workflow}, "\x00") < strings.Join([]string{out[k].Tenant, out[k].Fleet, out[k].Workflow}, "\x00")
	})
	return out, nil
}

// isOutcome reports whether an event type is a job's outcome.
func isOutcome(eventType string) bool {
	return eventType == EventSucceeded || eventType == EventDead || eventType == EventCanceled
}
