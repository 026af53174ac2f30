package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// Fair share on the lease path (docs/scaling.md, "Fair share on the lease
// path"). When the stage lists tenants, the lease rule (lease.Order) merges
// the top priority's jobs tenant by tenant as the fair-share rule would lease them,
// and the poll spreads over the head of that order. Its inputs are read
// cheaply: each tenant's leased jobs come from a census of the fleet's
// leased partition, read at most once per censusTTL per process and kept
// up to date with this process's own claims in between; the tenants
// waiting behind one tenant's backlog come from one read of the top
// priority that skips that tenant, also kept for censusTTL. A stage
// without tenants reads nothing more.

// censusTTL is how long a process trusts its census of a fleet's leased
// jobs per tenant, and its look past one tenant's backlog.
const censusTTL = time.Second

// fairScanPages bounds the look past one tenant's backlog: at most this
// many pages (1 MB each) of the top priority are read to find the others.
const fairScanPages = 4

// fairState is what one process knows of a fleet's tenants.
type fairState struct {
	mu sync.Mutex
	// leased counts the fleet's leased jobs per tenant, as of leasedAt.
	leased   map[string]int
	leasedAt time.Time
	// counting is set while a poll reads the census again.
	counting bool
	// others holds the oldest ready jobs at priority othersPriority of
	// every tenant but othersSkip, as of othersAt.
	others         []jobItem
	othersAt       time.Time
	othersPriority int
	othersSkip     string
}

// fairShare reports whether leases alternate between tenants: when the
// stage lists any.
func (s *Store) fairShare() bool { return s.cfg != nil && len(s.cfg.Tenants) > 0 }

func (s *Store) fairFor(fleet string) *fairState {
	st, _ := s.fair.LoadOrStore(fleet, &fairState{})
	return st.(*fairState)
}

// leasedByTenant answers the fleet's leased jobs per tenant: the census,
// read again when older than censusTTL.
func (s *Store) leasedByTenant(ctx context.Context, fs *fairState, fleet string, now time.Time) (map[string]int, error) {
	fs.mu.Lock()
	fresh := now.Sub(fs.leasedAt) < censusTTL && !now.Before(fs.leasedAt)
	if fs.leased != nil && (fresh || fs.counting) {
		// Fresh, or being read again by another poll of this process:
		// one read per process at a time is enough.
		out := maps.Clone(fs.leased)
		fs.mu.Unlock()
		return out, nil
	}
	fs.counting = true
	fs.mu.Unlock()
	items, err := s.readShards(ctx, s.shardPartitions(prefixLeased, fleet), "", "", 0, true)
	census := map[string]int{}
	for _, it := range items {
		census[it.TenantID]++
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.counting = false
	if err != nil {
		return nil, err
	}
	fs.leased, fs.leasedAt = census, now
	return maps.Clone(census), nil
}

// othersAtTop answers the oldest ready jobs at the given priority of every
// tenant but skip: remembered for censusTTL, read again otherwise.
func (s *Store) othersAtTop(ctx context.Context, fs *fairState, fleet string, priority int, skip string, now time.Time) ([]jobItem, error) {
	fs.mu.Lock()
	if fs.othersSkip == skip && fs.othersPriority == priority && !fs.othersAt.IsZero() && now.Sub(fs.othersAt) < censusTTL && !now.Before(fs.othersAt) {
		out := slices.Clone(fs.others)
		fs.mu.Unlock()
		return out, nil
	}
	fs.mu.Unlock()
	var items []jobItem
	for _, p := range s.readyPartitions(fleet) {
		q := byState(p)
		q.key = q.key.And(expression.Key(AttrGSI1SK).BeginsWith(fmt.Sprintf("%04d#", 1000-priority)))
		f := expression.Name(attrTenantID).NotEqual(expression.Value(skip))
		q.filter, q.limit, q.maxPages = &f, s.limit, fairScanPages
		more, err := queryItems[jobItem](ctx, s, q)
		if err != nil {
			return nil, err
		}
		items = append(items, more...)
	}
	inQueueOrder(items)
	items = items[:min(len(items), s.limit)]
	fs.mu.Lock()
	fs.others, fs.othersAt, fs.othersPriority, fs.othersSkip = items, now, priority, skip
	fs.mu.Unlock()
	return slices.Clone(items), nil
}

// fairClaimed keeps the process's fair-share view current after a claim
// attempt: a won claim counts in its tenant's leased jobs, and a job tried
// (won or lost) is no longer among the others waiting.
func (s *Store) fairClaimed(fleet string, c *jobItem, won bool) {
	if !s.fairShare() {
		return
	}
	fs := s.fairFor(fleet)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if won && fs.leased != nil {
		fs.leased[c.TenantID]++
	}
	fs.others = slices.DeleteFunc(fs.others, func(o jobItem) bool { return o.JobID == c.JobID })
}
