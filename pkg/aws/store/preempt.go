package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// Ending workers the control plane decided to end (an interruption, a stale
// or scaled-in worker) works from what the caller holds: the workers as it
// read them, and their leases found with one read of each fleet's leased
// partition. Each lease then moves in one transaction built from the index
// candidate; only a candidate whose write is refused (the lease ended
// meanwhile, or the preemption cap is reached, which the index does not
// carry) is read whole and decided again.

// DrainInstance drains every worker on an EC2 instance (one per agent) and
// answers them as the drain left them, in id order: one index read, then
// one conditional write per worker that returns the worker, so the lease
// counts are current. A revoked worker is answered as it is, undrained; one
// that has gone or moved to another instance since the index read is left
// out.
func (s *Store) DrainInstance(ctx context.Context, instanceID string) ([]worker.Worker, error) {
	cands, err := s.instanceCandidates(ctx, instanceID)
	if err != nil {
		return nil, err
	}
	var out []worker.Worker
	for _, c := range cands {
		w, ok, err := s.drainOn(ctx, c.WorkerID, instanceID)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, w)
		}
	}
	return out, nil
}

// drainOn drains one worker while it is on the instance and not revoked,
// answering the worker as written (or, revoked, as it is); ok is false for a
// worker gone or moved.
func (s *Store) drainOn(ctx context.Context, id, instanceID string) (worker.Worker, bool, error) {
	pk, sk := workerKey(id)
	e, err := update{pk: pk, sk: sk,
		set: expression.Set(expression.Name(attrWorkerStatus), expression.Value(string(worker.Draining))),
		cond: expression.AttributeExists(expression.Name(AttrPK)).
			And(expression.Name(attrInstanceID).Equal(expression.Value(instanceID))).
			And(expression.Name(attrWorkerStatus).NotEqual(expression.Value(string(worker.Revoked)))),
	}.build()
	if err != nil {
		return worker.Worker{}, false, fmt.Errorf("build drain of worker %s: %w", id, err)
	}
	res, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(pk, sk),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	item := map[string]types.AttributeValue(nil)
	switch {
	case errors.As(err, &ccf):
		item = ccf.Item
	case err != nil:
		return worker.Worker{}, false, fmt.Errorf("drain worker %s: %w", id, err)
	default:
		item = res.Attributes
	}
	if len(item) == 0 {
		return worker.Worker{}, false, nil // gone
	}
	var it workerItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return worker.Worker{}, false, fmt.Errorf("decode worker %s: %w", id, err)
	}
	w := it.toWorker()
	return w, w.InstanceID == instanceID, nil
}

// RequeueLeasesOf gives back every lease the workers hold, without spending
// attempts (each counts as a preemption), and answers how many jobs were
// requeued. workers are as the caller read them: one read with no lease is
// not looked for. The leases are found with one read of each shard of each
// fleet's leased partition (all of a fleet's at once). count, when set, is recorded once per event in the
// first requeue's transaction (alone when nothing is requeued).
func (s *Store) RequeueLeasesOf(ctx context.Context, workers []worker.Worker, reason job.Reason, count *fleetstate.Interruption) (int, error) {
	holders := map[string]bool{}
	var fleets []string
	for _, w := range workers {
		if w.Leases <= 0 || holders[w.ID] {
			continue
		}
		holders[w.ID] = true
		if !contains(fleets, w.Fleet) {
			fleets = append(fleets, w.Fleet)
		}
	}
	n := 0
	for _, fleet := range fleets {
		leased, err := s.readShards(ctx, s.shardPartitions(prefixLeased, fleet), "", "", 0, true)
		if err != nil {
			return n, err
		}
		for i := range leased {
			if !holders[leased[i].WorkerID] {
				continue
			}
			moved, counted, err := s.preemptCandidate(ctx, &leased[i], reason, count)
			if err != nil {
				return n, err
			}
			if counted {
				count = nil
			}
			if moved {
				n++
			}
		}
	}
	if count != nil {
		if _, err := s.RecordInterruption(ctx, *count); err != nil {
			return n, err
		}
	}
	return n, nil
}

func contains(ss []string, s string) bool {
	for _, v := range ss {
		if v == s {
			return true
		}
	}
	return false
}

// preemptCandidate requeues one lease from its index candidate in one
// transaction with its holder's lease count (and count, when set). The
// index does not carry the job's preemption cap, so the write assumes the
// preemption is within it and checks that; a refused write reads the job
// and decides again. counted says whether count was recorded (or had been,
// for a redelivered event).
func (s *Store) preemptCandidate(ctx context.Context, it *jobItem, reason job.Reason, count *fleetstate.Interruption) (moved, counted bool, err error) {
	now := s.clock.Now()
	j := it.toJob()
	rung := false
	if f, ok := s.cfg.Fleet(j.FleetSlug); ok {
		rung = f.OnDemand.Enabled()
	}
	cond := leaseHeldBy(it.LeaseToken, it.WorkerID)
	if !j.OnDemandOnly || !rung {
		j.MaxPreemptions = j.Preemptions + 1
		cond = cond.And(expression.Name(attrMaxPreemptions).GreaterThanEqual(expression.Value(j.MaxPreemptions)))
	}
	c := preemptionChange(j, job.AfterPreemption(j, rung), reason)
	c.it, c.worker = it, it.WorkerID
	u := s.jobUpdate(c, cond, now)
	items := []txItem{{name: memberJob, update: &u},
		{name: memberWorker, update: releaseFromWorker(it.WorkerID, now, expression.AttributeExists(expression.Name(AttrPK)))}}
	if count != nil {
		counters, err := interruptionItems(*count)
		if err != nil {
			return false, false, err
		}
		items = append(items, counters...)
	}
	err = s.transact(ctx, items...)
	var tf *txFailed
	switch {
	case err == nil:
		s.log.Info("lease requeued", "job_id", j.ID, "worker_id", j.WorkerID, "fleet", j.FleetSlug, "reason", reason, "preemptions", c.preemptions)
		return true, count != nil, nil
	case errors.As(err, &tf) && tf.failed(memberMarker) && !tf.failed(memberJob) && !tf.failed(memberWorker):
		// The event was counted already (a redelivery): requeue alone.
		moved, _, err := s.preemptCandidate(ctx, it, reason, nil)
		return moved, true, err
	case errors.As(err, &tf):
		// The lease ended meanwhile, the cap is reached or the holder is
		// gone: read the job and decide again.
		moved, err := s.preemptBySystem(ctx, it.JobID, it.LeaseToken, it.WorkerID, reason)
		return moved, false, err
	default:
		return false, false, fmt.Errorf("requeue job %s: %w", it.JobID, err)
	}
}

// RemoveWorkers requeues the leases of workers as the caller read them
// (RequeueLeasesOf) and deletes them, whatever their tokens (their
// instances are gone). It answers how many jobs were requeued; a worker
// already gone is not an error.
func (s *Store) RemoveWorkers(ctx context.Context, workers []worker.Worker, reason job.Reason) (int, error) {
	n, err := s.RequeueLeasesOf(ctx, workers, reason, nil)
	if err != nil {
		return n, err
	}
	for _, w := range workers {
		if err := s.deleteWorker(ctx, w, expression.AttributeExists(expression.Name(AttrPK))); err != nil {
			return n, fmt.Errorf("remove worker %s: %w", w.ID, err)
		}
	}
	return n, nil
}
