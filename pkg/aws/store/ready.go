package store

import (
	"context"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// A fleet's ready queue is spread over ready_shards partitions of the
// by-state index (docs/data-model.md, "The ready queue's shards"). Every
// shard is sorted as the one queue was, highest priority then oldest, and a
// job's shard is a hash of its id, so each shard holds an even share of
// every priority and age. Shard 0 is Q#<fleet>, the partition of a fleet
// with one shard and of every job queued before its fleet had more; shard
// n is Q#<fleet>#<n>.

// readyShards is how many shards the fleet's ready queue has.
func (s *Store) readyShards(fleet string) int {
	if f, ok := s.cfg.Fleet(fleet); ok && f.ReadyShards > 1 {
		return f.ReadyShards
	}
	return 1
}

// readyShardPartition is shard n of a fleet's ready queue.
func readyShardPartition(fleet string, n int) string {
	if n == 0 {
		return prefixReady + fleet
	}
	return prefixReady + fleet + "#" + strconv.Itoa(n)
}

// readyShardOf is the shard of a job among shards.
func readyShardOf(jobID string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(jobID))
	return int(h.Sum32() % uint32(shards))
}

// readyPartition is the ready-queue partition a job is queued in.
func (s *Store) readyPartition(fleet, jobID string) string {
	return readyShardPartition(fleet, readyShardOf(jobID, s.readyShards(fleet)))
}

// readyPartitions are every shard of a fleet's ready queue.
func (s *Store) readyPartitions(fleet string) []string {
	n := s.readyShards(fleet)
	out := make([]string, n)
	for i := range out {
		out[i] = readyShardPartition(fleet, i)
	}
	return out
}

// inReadyQueue is the condition that a job is queued in one of its fleet's
// ready shards (whichever: the shard count may have changed since).
func (s *Store) inReadyQueue(fleet string) expression.ConditionBuilder {
	parts := s.readyPartitions(fleet)
	pk := expression.Name(AttrGSI1PK)
	if len(parts) == 1 {
		return pk.Equal(expression.Value(parts[0]))
	}
	others := make([]expression.OperandBuilder, 0, len(parts)-1)
	for _, p := range parts[1:] {
		others = append(others, expression.Value(p))
	}
	return pk.In(expression.Value(parts[0]), others...)
}

// readReady reads the head of every shard of a fleet's ready queue, at
// most perShard items of each (0: all), and merges them in queue order:
// highest priority, then oldest. The first perShard items of the merge
// are exactly the queue's first perShard (each of them is among the first
// perShard of its own shard); past them the merge may leave out a few
// that a shard held beyond its limit. full reports whether any shard had
// more than was read. The shards are read at once, one query each.
func (s *Store) readReady(ctx context.Context, fleet string, perShard int) (items []jobItem, full bool, err error) {
	parts := s.readyPartitions(fleet)
	if len(parts) == 1 {
		items, err := s.queryIndex(ctx, parts[0], "", perShard, true)
		return items, perShard > 0 && len(items) >= perShard, err
	}
	got := make([][]jobItem, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() { got[i], errs[i] = s.queryIndex(ctx, p, "", perShard, true) })
	}
	wg.Wait()
	for i := range parts {
		if errs[i] != nil {
			return nil, false, errs[i]
		}
		items = append(items, got[i]...)
		full = full || (perShard > 0 && len(got[i]) >= perShard)
	}
	inQueueOrder(items)
	return items, full, nil
}

// inQueueOrder sorts items read from several ready shards as one queue:
// their sort keys order them by priority, then age, then id.
func inQueueOrder(items []jobItem) {
	slices.SortStableFunc(items, func(a, b jobItem) int { return strings.Compare(a.GSI1SK, b.GSI1SK) })
}

// countReady counts a fleet's ready jobs, over every shard.
func (s *Store) countReady(ctx context.Context, fleet string) (int, error) {
	total := 0
	for _, p := range s.readyPartitions(fleet) {
		n, err := s.countIndex(ctx, p)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
