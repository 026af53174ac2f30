package store_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

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
	cfg, err := fleetconfig.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(testenv.DynamoDBEndpoint(t), faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	client := localaws.DynamoDBClient(p.URL)
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
