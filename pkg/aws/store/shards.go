package store

import (
	"context"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// A fleet's busy partitions of the by-state index are spread over its
// ready_shards shards (docs/data-model.md, "Shards of a fleet's
// partitions"): the ready queue Q#, the leased jobs L#, the succeeded jobs
// S# and the workers W#. Each partition key takes at most 1,000 write units
// a second, and every job is put in and taken out of Q# and L#, and its
// worker's entry in W# changes at its claim and at its release, so one key
// each caps a fleet near 500 leases a second. Shard 0 of each is the key a
// fleet with one shard uses (Q#<fleet>, L#<fleet>, ...), where every item
// filed before the fleet had more stays and is read; shard n is
// <prefix><fleet>#<n>. A job's shard is a hash of its id, a worker's a
// hash of its worker id, chosen whenever the item is filed there. Readers
// read every shard, one query each, sent at once.

// shardCount is how many shards each of a fleet's sharded partitions has.
func (s *Store) shardCount(fleet string) int {
	if f, ok := s.cfg.Fleet(fleet); ok && f.ReadyShards > 1 {
		return f.ReadyShards
	}
	return 1
}

// shardPartition is shard n of a fleet's partition under prefix.
func shardPartition(prefix, fleet string, n int) string {
	if n == 0 {
		return prefix + fleet
	}
	return prefix + fleet + "#" + strconv.Itoa(n)
}

// shardOf is the shard of an item with this id (a job's or a worker's)
// among shards: FNV-1a of the id, modulo the count.
func shardOf(id string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(shards))
}

// shardFor is the partition under prefix an item with this id is filed in.
func (s *Store) shardFor(prefix, fleet, id string) string {
	return shardPartition(prefix, fleet, shardOf(id, s.shardCount(fleet)))
}

// shardPartitions are every shard of a fleet's partition under prefix.
func (s *Store) shardPartitions(prefix, fleet string) []string {
	out := make([]string, s.shardCount(fleet))
	for i := range out {
		out[i] = shardPartition(prefix, fleet, i)
	}
	return out
}

// leasedPartition is the shard of a fleet's leased jobs a job is filed in.
func (s *Store) leasedPartition(fleet, jobID string) string {
	return s.shardFor(prefixLeased, fleet, jobID)
}

// eachShard runs read on every partition (or query) at once and answers
// the results in the partitions' order; one partition is read inline.
func eachShard[P, T any](parts []P, read func(partition P) (T, error)) ([]T, error) {
	got := make([]T, len(parts))
	if len(parts) == 1 {
		var err error
		got[0], err = read(parts[0])
		return got, err
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() { got[i], errs[i] = read(p) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return got, nil
}

// readShards reads every partition of parts (the shards of one of a
// fleet's partitions) at once: up to perShard items of each (0: all) whose
// sort key is at least from (when set) or below `below` (when set), and
// merges them in sort-key order, ascending when forward. Each shard's first
// perShard hold the first perShard of the merge.
func (s *Store) readShards(ctx context.Context, parts []string, from, below string, perShard int, forward bool) ([]jobItem, error) {
	got, err := eachShard(parts, func(p string) ([]jobItem, error) {
		return s.queryIndexRange(ctx, p, from, below, perShard, forward)
	})
	if err != nil {
		return nil, err
	}
	if len(got) == 1 {
		return got[0], nil
	}
	var items []jobItem
	for _, g := range got {
		items = append(items, g...)
	}
	inSortKeyOrder(items, forward)
	return items, nil
}

// inSortKeyOrder sorts items read from several shards of one partition as
// the one partition would hold them.
func inSortKeyOrder(items []jobItem, forward bool) {
	slices.SortStableFunc(items, func(a, b jobItem) int {
		if forward {
			return strings.Compare(a.GSI1SK, b.GSI1SK)
		}
		return strings.Compare(b.GSI1SK, a.GSI1SK)
	})
}

// countShards counts the items of every partition of parts, at once.
func (s *Store) countShards(ctx context.Context, parts []string) (int, error) {
	got, err := eachShard(parts, func(p string) (int, error) { return s.countIndex(ctx, p) })
	total := 0
	for _, n := range got {
		total += n
	}
	return total, err
}

// terminalPartition is the partition a job finished in status is filed in:
// a shard of S#<fleet> for a success, X#<fleet> or C#<fleet> otherwise
// (one key each: a fleet fails or cancels far fewer jobs than it runs).
func (s *Store) terminalPartition(fleet string, status job.Status, jobID string) string {
	if status == job.Succeeded {
		return s.shardFor(prefixSucceeded, fleet, jobID)
	}
	return terminalPrefix(status) + fleet
}

// terminalPartitions are every partition of a fleet's jobs finished in status.
func (s *Store) terminalPartitions(fleet string, status job.Status) []string {
	if status == job.Succeeded {
		return s.shardPartitions(prefixSucceeded, fleet)
	}
	return []string{terminalPrefix(status) + fleet}
}
