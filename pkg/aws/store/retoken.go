package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// maxRetokenLeases bounds the leases whose digest one token replacement
// moves: a transaction holds at most 100 members, one of them the worker.
const maxRetokenLeases = 99

// replaceToken writes a worker's new token digest (set carries it, with
// whatever else the caller changes; cond is the caller's condition on the
// worker item) and moves every lease the worker holds to that digest in the
// same transaction, so that a heartbeat, which writes only the job
// (Heartbeat), is refused with the replaced token from the moment the new
// one exists. The leases are found in the fleet's leased partition, an
// index: the worker member's condition also says how many leases it holds,
// so a lease the index does not show yet fails the transaction instead of
// keeping the old digest, and the replacement is tried again. It answers
// errConditionFailed when the caller's condition failed, and ErrContention
// when the worker's leases kept changing under it.
func (s *Store) replaceToken(ctx context.Context, id, tokenHash string, set expression.UpdateBuilder, cond expression.ConditionBuilder) error {
	pk, sk := workerKey(id)
	for range 3 {
		var cur workerItem
		found, err := s.getItem(ctx, pk, sk, &cur)
		if err != nil {
			return err
		}
		if !found {
			return errConditionFailed
		}
		held, err := s.heldLeases(ctx, cur.Fleet, id, cur.Leases)
		if errors.Is(err, errLeasesMoved) {
			continue
		}
		if err != nil {
			return err
		}
		count := expression.Name(attrLeases)
		same := expression.Or(expression.AttributeNotExists(count), count.LessThanEqual(expression.Value(0)))
		if len(held) > 0 {
			same = count.Equal(expression.Value(len(held)))
		}
		w := update{pk: pk, sk: sk, set: set, cond: cond.And(same)}
		if len(held) == 0 {
			err = s.updateItem(ctx, w)
		} else {
			items := []txItem{{name: memberWorker, update: &w}}
			for _, it := range held {
				items = append(items, txItem{name: memberJob, update: &update{pk: it.PK, sk: it.SK,
					set:  expression.Set(expression.Name(attrLeaseAuth), expression.Value(tokenHash)),
					cond: leaseHeldBy(it.LeaseToken, id)}})
			}
			err = s.transact(ctx, items...)
			var tf *txFailed
			if errors.As(err, &tf) {
				if tf.failed(memberJob) {
					continue // a lease ended meanwhile
				}
				err = errConditionFailed
			}
		}
		if !errors.Is(err, errConditionFailed) {
			return err
		}
		// Refused: by the caller's condition, or because the worker's
		// lease count moved since it was read.
		var now workerItem
		found, gerr := s.getItem(ctx, pk, sk, &now)
		if gerr != nil {
			return gerr
		}
		if !found || now.Leases == cur.Leases {
			return errConditionFailed
		}
	}
	return fmt.Errorf("replace the token of worker %s: its leases kept changing: %w", id, ErrContention)
}

var errLeasesMoved = errors.New("the worker's leases are not all in the index yet")

// heldLeases reads the leases a worker holds (want of them, by its item's
// count) from its fleet's leased partition, each checked against the job
// item itself (the index may still show a lease that has ended).
func (s *Store) heldLeases(ctx context.Context, fleet, id string, want int) ([]*jobItem, error) {
	if want <= 0 {
		return nil, nil
	}
	if want > maxRetokenLeases {
		return nil, fmt.Errorf("worker %s holds %d leases, more than a token replacement moves (%d): %w", id, want, maxRetokenLeases, ErrConflict)
	}
	leased, err := s.readShards(ctx, s.shardPartitions(prefixLeased, fleet), "", "", 0, true)
	if err != nil {
		return nil, err
	}
	var held []*jobItem
	for i := range leased {
		if leased[i].WorkerID != id {
			continue
		}
		it, err := s.getJobItem(ctx, leased[i].JobID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if it.Status == string(job.Leased) && it.WorkerID == id {
			held = append(held, it)
		}
	}
	if len(held) != want {
		return nil, errLeasesMoved
	}
	return held, nil
}

// RotateWorkerToken replaces a worker's token digest; the leases it holds
// move to the new token at once (replaceToken).
func (s *Store) RotateWorkerToken(ctx context.Context, id, tokenHash string) (worker.Worker, error) {
	return s.workerAfter(ctx, id, s.replaceToken(ctx, id, tokenHash, expression.Set(expression.Name(attrTokenHash), expression.Value(tokenHash)),
		expression.AttributeExists(expression.Name(AttrPK)).And(expression.Name(attrWorkerStatus).NotEqual(expression.Value(string(worker.Revoked))))))
}
