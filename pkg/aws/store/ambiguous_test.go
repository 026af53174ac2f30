package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/faultproxy"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// newFaultyEnv is newEnv with its DynamoDB client behind a fault proxy; the
// SDK's own retries are on, as in production.
func newFaultyEnv(t *testing.T) (*env, *faultproxy.Proxy) {
	t.Helper()
	return newFaultyEnvWith(t, testConfig)
}

// newFaultyEnvWith is newFaultyEnv with a config of its own.
func newFaultyEnvWith(t *testing.T, config string) (*env, *faultproxy.Proxy) {
	t.Helper()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(config))
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(testenv.DynamoDBEndpoint(t), faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	client := localaws.DynamoDBClient(p.URL, func(o *dynamodb.Options) {
		// The service's attempts, without the waits between them.
		o.Retryer = awsenv.Retryer(awsenv.DynamoDB, func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	})
	table := testenv.TableName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := store.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	st := store.New(client, store.Options{Table: table, Config: cfg, Clock: clk, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)})
	return &env{t: t, ctx: context.Background(), clock: clk, cfg: cfg, st: st}, p
}

// A claim whose answer was lost after it committed is retried by the SDK
// with the same ClientRequestToken and meets its own write as success: the
// worker gets the job it claimed, no other job is leased, its lease count
// is one.
func TestClaimWithLostAnswerHandsTheLeaseToItsWorker(t *testing.T) {
	t.Parallel()
	e, p := newFaultyEnv(t)
	e.submit("first", "wf-a", 0)
	e.clock.Advance(time.Second)
	e.submit("second", "wf-a", 0)
	w := e.register("w1", "gpu", 2)
	p.Next("TransactWriteItems", faultproxy.ResetAfter)
	j := e.lease(w)
	if p.Counts()[faultproxy.ResetAfter] != 1 {
		t.Fatal("the fault was not injected")
	}
	if j.ID != "first" {
		t.Fatalf("leased %s; the claim of first was lost", j.ID)
	}
	got := e.wantStatus("first", job.Leased)
	if got.LeaseToken != j.LeaseToken || got.WorkerID != "w1" || got.Attempts != 1 {
		t.Fatalf("first = %+v, want leased to w1 under the answered token, one attempt", got)
	}
	e.wantStatus("second", job.Queued)
	e.wantLeases("w1", 1)
}

// Fail, Requeue and Complete whose answers were lost report what happened,
// and count it once.
func TestReportsWithLostAnswersCountOnce(t *testing.T) {
	t.Parallel()
	e, p := newFaultyEnv(t)
	w := e.register("w1", "gpu", 1)

	e.submit("f", "wf-a", 0)
	j := e.lease(w)
	p.Next("TransactWriteItems", faultproxy.ResetAfter)
	out, err := e.st.Fail(e.ctx, w, "f", j.LeaseToken, job.Error{Message: "boom", Retryable: true})
	if err != nil || out.Status != job.Queued || out.Attempts != 1 {
		t.Fatalf("Fail with a lost answer = %+v, %v; want queued after 1 attempt", out, err)
	}
	if got := e.job("f"); got.Attempts != 1 || len(got.History) != 3 {
		t.Fatalf("f = attempts %d, %d history entries; want 1 and 3 (created, leased, failed)", got.Attempts, len(got.History))
	}
	e.wantLeases("w1", 0)

	e.submit("r", "wf-b", 0)
	j = e.lease(w)
	if j.ID != "r" {
		t.Fatalf("leased %s", j.ID)
	}
	p.Next("TransactWriteItems", faultproxy.ResetAfter)
	out, err = e.st.Requeue(e.ctx, w, "r", j.LeaseToken, job.SpotInterruption)
	if err != nil || out.Status != job.Queued || out.Preemptions != 1 {
		t.Fatalf("Requeue with a lost answer = %+v, %v", out, err)
	}
	e.wantLeases("w1", 0)

	j = e.lease(w)
	p.Next("TransactWriteItems", faultproxy.ResetAfter)
	if err := e.st.Complete(e.ctx, w, j.ID, j.LeaseToken, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatalf("Complete with a lost answer: %v", err)
	}
	e.wantStatus(j.ID, job.Succeeded)
	e.wantLeases("w1", 0)
	if n := p.Counts()[faultproxy.ResetAfter]; n != 3 {
		t.Fatalf("%d answers lost, want 3", n)
	}
}

// failEvery makes every call of op fail with kind until the returned func
// is called.
func failEvery(p *faultproxy.Proxy, op string, kind faultproxy.Kind) (stop func()) {
	p.SetOptions(faultproxy.Options{Rate: 1, Ops: []string{op}, Kinds: []faultproxy.Kind{kind}})
	return func() { p.SetOptions(faultproxy.Options{}) }
}

// A poll whose read of the job it just claimed fails once (every SDK
// attempt of one read) reads again and hands the lease to its worker.
func TestPollReadsItsClaimAgainAfterAFailedRead(t *testing.T) {
	t.Parallel()
	e, p := newFaultyEnv(t)
	e.submit("only", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	faults := make([]faultproxy.Kind, awsenv.Retries[awsenv.DynamoDB].MaxAttempts)
	for i := range faults {
		faults[i] = faultproxy.ServerError
	}
	p.Next("GetItem", faults...)
	j := e.lease(w)
	if n := p.Counts()[faultproxy.ServerError]; n != len(faults) {
		t.Fatalf("%d faults injected, want %d", n, len(faults))
	}
	got := e.wantStatus("only", job.Leased)
	if j.ID != "only" || got.LeaseToken != j.LeaseToken || got.WorkerID != "w1" || got.Attempts != 1 {
		t.Fatalf("answered %+v, stored %+v; want the lease of only to w1, one attempt", j, got)
	}
	e.wantLeases("w1", 1)
}

// A poll that cannot read the job it claimed at all takes the claim back:
// the poll fails, and nothing changed (the job is ready, no attempt spent,
// the worker holds nothing); the next poll leases it on its first attempt.
func TestPollThatCannotReadItsClaimUndoesIt(t *testing.T) {
	t.Parallel()
	e, p := newFaultyEnv(t)
	e.submit("only", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	stop := failEvery(p, "GetItem", faultproxy.Unavailable)
	_, err := e.st.LeaseNext(e.ctx, w, e.workflows("gpu"))
	stop()
	if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNoJob) {
		t.Fatalf("LeaseNext with every read failing = %v; want the read's error", err)
	}
	got := e.wantStatus("only", job.Queued)
	if got.Attempts != 0 {
		t.Fatalf("attempts = %d after an undone claim, want 0", got.Attempts)
	}
	if last := got.History[len(got.History)-1]; last.Reason != job.ReasonLeaseUndone || last.From != job.Leased {
		t.Fatalf("last history entry %+v, want leased -> queued (%s)", last, job.ReasonLeaseUndone)
	}
	e.wantLeases("w1", 0)
	j := e.lease(w)
	if j.ID != "only" || j.Attempts != 1 {
		t.Fatalf("next poll leased %s on attempt %d, want only on attempt 1", j.ID, j.Attempts)
	}
	e.wantLeases("w1", 1)
}

// A claim whose every answer is lost (the SDK gives up) but which committed
// is found by the read and handed over; one that never reached the server
// changed nothing.
func TestClaimTheSDKGaveUpOnIsFoundByTheRead(t *testing.T) {
	t.Parallel()
	e, p := newFaultyEnv(t)
	e.submit("only", "wf-a", 0)
	w := e.register("w1", "gpu", 2)
	stop := failEvery(p, "TransactWriteItems", faultproxy.ResetAfter)
	j, err := e.st.LeaseNext(e.ctx, w, e.workflows("gpu"))
	stop()
	if err != nil {
		t.Fatalf("LeaseNext with every answer of the claim lost: %v", err)
	}
	got := e.wantStatus("only", job.Leased)
	if got.LeaseToken != j.LeaseToken || got.Attempts != 1 {
		t.Fatalf("answered %+v, stored %+v", j, got)
	}
	e.wantLeases("w1", 1)

	e.submit("next", "wf-a", 0)
	stop = failEvery(p, "TransactWriteItems", faultproxy.ResetBefore)
	_, err = e.st.LeaseNext(e.ctx, w, e.workflows("gpu"))
	stop()
	if err == nil || errors.Is(err, store.ErrNoJob) {
		t.Fatalf("LeaseNext with the claim never reaching the server = %v; want its error", err)
	}
	if got := e.wantStatus("next", job.Queued); got.Attempts != 0 {
		t.Fatalf("next: attempts %d, want 0", got.Attempts)
	}
	e.wantLeases("w1", 1)
}

// A lease that runs out and is swept between the claim and its read is not
// answered (the worker does not hold it): the poll leases again, here the
// same job on its next attempt, under a token the store holds.
func TestPollDoesNotAnswerALeaseThatEndedBeforeItsRead(t *testing.T) {
	t.Parallel()
	e, p := newFaultyEnv(t)
	e.submit("only", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	f, _ := e.cfg.Fleet("gpu")
	var fired atomic.Bool
	p.SetOptions(faultproxy.Options{Forwarded: func(op string) {
		if op != "TransactWriteItems" || !fired.CompareAndSwap(false, true) {
			return
		}
		e.clock.Advance(f.LeaseDuration() + time.Second)
		if r, err := e.st.Sweep(e.ctx, "gpu"); err != nil || r.Leases.Requeued != 1 {
			t.Errorf("sweep = %+v, %v; want the claim's lease requeued", r, err)
		}
	}})
	j := e.lease(w)
	got := e.wantStatus("only", job.Leased)
	if j.ID != "only" || got.LeaseToken != j.LeaseToken || got.Attempts != 2 {
		t.Fatalf("answered %+v, stored %+v; want only re-leased on attempt 2 under the answered token", j, got)
	}
	e.wantLeases("w1", 1)
}

// A poll whose caller goes away once its claim has reached the server (a
// closed connection, a function timing out) takes the claim back: nobody
// would receive the lease.
func TestPollWhoseCallerLeftUndoesItsClaim(t *testing.T) {
	t.Parallel()
	e, p := newFaultyEnv(t)
	e.submit("only", "wf-a", 0)
	w := e.register("w1", "gpu", 1)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	p.SetOptions(faultproxy.Options{Forwarded: func(op string) {
		if op == "TransactWriteItems" {
			cancel()
		}
	}})
	_, err := e.st.LeaseNext(ctx, w, e.workflows("gpu"))
	p.SetOptions(faultproxy.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("LeaseNext with its caller gone = %v; want context.Canceled", err)
	}
	if got := e.wantStatus("only", job.Queued); got.Attempts != 0 {
		t.Fatalf("attempts = %d after an undone claim, want 0", got.Attempts)
	}
	e.wantLeases("w1", 0)
	if j := e.lease(w); j.ID != "only" || j.Attempts != 1 {
		t.Fatalf("next poll leased %s on attempt %d, want only on attempt 1", j.ID, j.Attempts)
	}
}
