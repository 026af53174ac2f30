package store

import (
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/domain/cost"
)

// Jobs pinned to On-Demand. A job that reached its preemption cap in a fleet
// with an On-Demand rung is queued again with on_demand_only set
// (job.AfterPreemption). The flag is in the index projection, so the lease
// path sees it on the candidates it already read:
//
//   - with no pinned candidate (the common case) nothing changes and nothing
//     more is read;
//   - with one, the poll needs the worker's purchase option, which is on the
//     worker item: the lease planner reads it once per worker per process and
//     remembers it (a worker's purchase option is its instance's and does not
//     change), so a poll pays one GetItem more at most once per worker;
//   - the lease rule (lease.Order) drops the pinned candidates for a worker
//     not registered as on-demand (Spot, or no purchase option), so it never
//     tries them, and puts them first within their priority for an
//     On-Demand worker: the On-Demand capacity the scaler launched for them
//     is theirs before anyone else's, and Spot workers can take the rest.
//
// The claim transaction checks it again (onDemandCond), so a stale answer
// can never let a Spot worker hold a pinned job.

// onDemandCond is the claim's condition on the worker for a pinned job.
func onDemandCond(c *jobItem, cond expression.ConditionBuilder) expression.ConditionBuilder {
	if !c.OnDemandOnly {
		return cond
	}
	return cond.And(expression.Name(attrPurchase).Equal(expression.Value(cost.OnDemand)))
}
