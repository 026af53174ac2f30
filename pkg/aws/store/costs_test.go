package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

const pricedConfig = testConfig + `
prices:
  overhead: 0.2
  instance_types:
    g5.xlarge: {on_demand: 1.0, spot: 0.5}
`

func TestOutcomeRecordsTheJobsCostOnceAndTotalsIt(t *testing.T) {
	t.Parallel()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(pricedConfig))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, cfg)
	a := store.WorkerAuth{WorkerID: "w1", Fleet: "gpu", TokenHash: "hash-w1"}
	if _, err := e.st.RegisterWorker(e.ctx, store.Registration{WorkerID: "w1", Fleet: "gpu", Stage: "test", InstanceID: "i-1",
		InstanceType: "g5.xlarge", PurchaseOption: "spot", MaxConcurrency: 2, TokenHash: a.TokenHash}); err != nil {
		t.Fatal(err)
	}
	e.submit("run", "wf-a", 0)
	j := e.lease(a)
	e.clock.Advance(30 * time.Minute)
	if err := e.st.Complete(e.ctx, a, j.ID, j.LeaseToken, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	// Canceled before any lease: it costs nothing, and is counted.
	e.submit("never", "wf-a", 0)
	if _, err := e.st.Cancel(e.ctx, "never"); err != nil {
		t.Fatal(err)
	}
	if e.job("run").CostUSD != nil {
		t.Fatal("priced before its outcome was relayed")
	}
	rec := &recorder{}
	for _, id := range []string{"run", "never", "run"} {
		if _, err := e.st.RelayJob(e.ctx, rec, id); err != nil {
			t.Fatal(err)
		}
	}
	// Spot $0.50/h, one slot of two, 30 minutes, 20% boot and idle.
	want := 0.5 / 2 * 0.5 * 1.2
	got := e.job("run").CostUSD
	if got == nil || *got != want {
		t.Fatalf("cost_usd = %v, want %v", got, want)
	}
	if c := e.job("never").CostUSD; c == nil || *c != 0 {
		t.Fatalf("never-leased cost_usd = %v, want 0", c)
	}
	var published *float64
	for _, ev := range rec.events {
		if ev.Detail.JobID == "run" && ev.DetailType == store.EventSucceeded {
			published = ev.Detail.CostUSD
		}
	}
	if published == nil || *published != want {
		t.Fatalf("outcome event cost_usd = %v, want %v", published, want)
	}
	groups, err := e.st.CostsSince(e.ctx, e.clock.Now().Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0] != (store.CostGroup{Tenant: "t1", Fleet: "gpu", Workflow: "wf-a", Jobs: 2, USD: want}) {
		t.Fatalf("CostsSince = %+v, want one group of 2 jobs costing %v", groups, want)
	}
	// A window that starts after the hour the jobs finished holds nothing.
	later, err := e.st.CostsSince(e.ctx, e.clock.Now().Add(2*time.Hour))
	if err != nil || len(later) != 0 {
		t.Fatalf("CostsSince(later) = %+v, %v", later, err)
	}
}

func TestAJobWithoutAPriceIsCountedUnpriced(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // no prices
	a := e.register("w1", "gpu", 1)
	e.submit("x", "wf-a", 0)
	j := e.lease(a)
	e.clock.Advance(time.Minute)
	if _, err := e.st.Fail(e.ctx, a, j.ID, j.LeaseToken, job.Error{Code: "boom", Message: "no"}); err != nil {
		t.Fatal(err)
	}
	e.wantStatus("x", job.Dead)
	if _, err := e.st.RelayJob(e.ctx, &recorder{}, "x"); err != nil {
		t.Fatal(err)
	}
	if c := e.job("x").CostUSD; c != nil {
		t.Fatalf("cost_usd = %v without a price", *c)
	}
	groups, err := e.st.CostsSince(e.ctx, e.clock.Now().Add(-time.Hour))
	if err != nil || len(groups) != 1 || groups[0].Jobs != 1 || groups[0].Unpriced != 1 || groups[0].USD != 0 {
		t.Fatalf("CostsSince = %+v, %v; want one unpriced job", groups, err)
	}
}

// An hour's cost total of one tenant, fleet and workflow is spread over
// shards (partition keys chosen by the job's id), so the relays of a busy
// workflow's outcomes do not all add to one item: 64 outcomes write at
// least four COST# keys, none more than a third of them, and CostsSince
// sums the shards with a total a previous release kept under COST#<day>.
func TestCostTotalsSpreadOverShards(t *testing.T) {
	t.Parallel()
	const n = 64
	m := newModeledEnv(t, capacityConfig, 0)
	m.createJobs(t, "job", n)
	day := m.clock.Now().UTC()
	old := map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "COST#" + day.Format("20060102")}, "SK": &types.AttributeValueMemberS{Value: day.Format("15") + "#gpu#t#wf-a"},
		"tenant_id": &types.AttributeValueMemberS{Value: "t"}, "fleet": &types.AttributeValueMemberS{Value: "gpu"}, "workflow_id": &types.AttributeValueMemberS{Value: "wf-a"},
		"jobs": &types.AttributeValueMemberN{Value: "5"}, "unpriced": &types.AttributeValueMemberN{Value: "0"}, "micro_usd": &types.AttributeValueMemberN{Value: "0"},
	}
	if _, err := m.client.PutItem(m.ctx, &dynamodb.PutItemInput{TableName: &m.table, Item: old}); err != nil {
		t.Fatal(err)
	}
	m.nextSecond()
	for i := range n {
		id := fmt.Sprintf("job-%05d", i)
		if _, err := m.st.Cancel(m.ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := m.st.RelayJob(m.ctx, discard{}, id); err != nil {
			t.Fatal(err)
		}
	}
	m.wantWritesSpread(t, fmt.Sprintf("the cost totals of %d outcomes (%d write units)", n, 2*n), "COST#", 2*n/3)
	groups, err := m.st.CostsSince(m.ctx, day.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Jobs != n+5 {
		t.Fatalf("CostsSince = %+v, want one group of %d jobs (%d now, 5 the previous release totalled)", groups, n+5, n)
	}
}
