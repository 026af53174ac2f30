package store

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// A fleet's ready queue is spread over its shards (shards.go;
// docs/data-model.md, "The ready queue's shards"). Every shard is sorted as
// the one queue was, highest priority then oldest, and a job's shard is a
// hash of its id, so each shard holds an even share of every priority and
// age. Shard 0 is Q#<fleet>, the partition of a fleet with one shard and of
// every job queued before its fleet had more; shard n is Q#<fleet>#<n>.

// readyPartition is the ready-queue partition a job is queued in.
func (s *Store) readyPartition(fleet, jobID string) string {
	return s.shardFor(prefixReady, fleet, jobID)
}

// readyPartitions are every shard of a fleet's ready queue.
func (s *Store) readyPartitions(fleet string) []string {
	return s.shardPartitions(prefixReady, fleet)
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
// most perShard items of each (0: all), at once, and merges them in queue
// order: highest priority, then oldest (readShards). The first perShard
// items of the merge are exactly the queue's first perShard; past them the
// merge may leave out a few that a shard held beyond its limit.
func (s *Store) readReady(ctx context.Context, fleet string, perShard int) ([]jobItem, error) {
	return s.readShards(ctx, s.readyPartitions(fleet), "", "", perShard, true)
}

// readShardHeads reads the heads of a fleet's ready shards at once, one
// query each: at most limits[i] items of shard i (0: the shard is not
// read), each shard's in queue order. A fleet whose shard count changed
// since the limits were made reads the shards it has.
func (s *Store) readShardHeads(ctx context.Context, fleet string, limits []int) ([][]jobItem, error) {
	parts := s.readyPartitions(fleet)
	shards := make([]int, len(parts))
	for i := range shards {
		shards[i] = i
	}
	return eachShard(shards, func(i int) ([]jobItem, error) {
		if i >= len(limits) || limits[i] <= 0 {
			return nil, nil
		}
		return s.queryIndex(ctx, parts[i], "", limits[i], true)
	})
}

// inQueueOrder sorts items read from several ready shards as one queue:
// their sort keys order them by priority, then age, then id.
func inQueueOrder(items []jobItem) { inSortKeyOrder(items, true) }

// countReady counts a fleet's ready jobs, over every shard.
func (s *Store) countReady(ctx context.Context, fleet string) (int, error) {
	return s.countShards(ctx, s.readyPartitions(fleet))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
