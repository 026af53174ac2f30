package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// Fair share on the lease path (docs/scaling.md, "Fair share on the lease
// path"): the reads the lease planner asks for when the stage lists
// tenants. The planner decides when to read them and how long to trust
// them (lease.Memory); these only read.

// fairScanPages bounds the look past one tenant's backlog: at most this
// many pages (1 MB each) of the top priority are read to find the others.
const fairScanPages = 4

// leasedByTenant is the census of a fleet's leased jobs per tenant, read
// from its leased partition.
func (s *Store) leasedByTenant(ctx context.Context, fleet string) (map[string]int, error) {
	items, err := s.readShards(ctx, s.shardPartitions(prefixLeased, fleet), "", "", 0, true)
	if err != nil {
		return nil, err
	}
	census := map[string]int{}
	for _, it := range items {
		census[it.TenantID]++
	}
	return census, nil
}

// othersAtTop reads up to limit jobs of one priority of tenants other than
// skip, in queue order: the jobs a read stopped short of behind one
// tenant's backlog.
func (s *Store) othersAtTop(ctx context.Context, fleet string, priority int, skip string, limit int) ([]jobItem, error) {
	var items []jobItem
	for _, p := range s.readyPartitions(fleet) {
		q := byState(p)
		q.key = q.key.And(expression.Key(AttrGSI1SK).BeginsWith(fmt.Sprintf("%04d#", 1000-priority)))
		f := expression.Name(attrTenantID).NotEqual(expression.Value(skip))
		q.filter, q.limit, q.maxPages = &f, limit, fairScanPages
		more, err := queryItems[jobItem](ctx, s, q)
		if err != nil {
			return nil, err
		}
		items = append(items, more...)
	}
	inQueueOrder(items)
	return items[:min(len(items), limit)], nil
}
