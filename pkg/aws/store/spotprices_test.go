package store_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// runPriced registers a worker of the gpu fleet, has it lease one job of
// tenant for d and complete it, relays the outcome twice, and answers the
// job's cost_usd.
func (e *env) runPriced(worker, zone, purchase, tenant string, d time.Duration) *float64 {
	e.t.Helper()
	a := store.WorkerAuth{WorkerID: worker, Fleet: "gpu", TokenHash: "hash-" + worker}
	if _, err := e.st.RegisterWorker(e.ctx, store.Registration{WorkerID: worker, Fleet: "gpu", Stage: "test", InstanceID: "i-" + worker,
		InstanceType: "g5.xlarge", AZ: zone, PurchaseOption: purchase, MaxConcurrency: 1, TokenHash: a.TokenHash}); err != nil {
		e.t.Fatal(err)
	}
	id := "job-" + worker
	if _, _, err := e.st.CreateJob(e.ctx, job.Spec{ID: id, TenantID: tenant, WorkflowID: "wf-a", Input: json.RawMessage(`{}`)}); err != nil {
		e.t.Fatal(err)
	}
	j := e.lease(a)
	if j.ID != id {
		e.t.Fatalf("%s leased %s, want %s", worker, j.ID, id)
	}
	e.clock.Advance(d)
	if err := e.st.Complete(e.ctx, a, j.ID, j.LeaseToken, json.RawMessage(`{}`)); err != nil {
		e.t.Fatal(err)
	}
	for range 2 {
		if _, err := e.st.RelayJob(e.ctx, &recorder{}, id); err != nil {
			e.t.Fatal(err)
		}
	}
	return e.job(id).CostUSD
}

func wantCost(t *testing.T, name string, got *float64, want float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: unpriced, want cost_usd %v", name, want)
	} else if *got != want {
		t.Errorf("%s: cost_usd = %v, want %v", name, *got, want)
	}
}

// tenantCosts sums the CostUSD lines by tenant and counts them.
func tenantCosts(t *testing.T, out *bytes.Buffer) (map[string]float64, int) {
	t.Helper()
	sums, n := map[string]float64{}, 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var line struct {
			Stage, Tenant string
			CostUSD       float64
			AWS           struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
				}
			} `json:"_aws"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("metric line %q: %v", sc.Text(), err)
		}
		d := line.AWS.CloudWatchMetrics
		if line.Stage != "test" || len(d) != 1 || d[0].Namespace != "fleetq" || len(d[0].Dimensions) != 1 || len(d[0].Dimensions[0]) != 2 {
			t.Fatalf("metric line %s: want namespace fleetq, dimensions Stage and Tenant", sc.Text())
		}
		sums[line.Tenant] += line.CostUSD
		n++
	}
	return sums, n
}

func TestSpotJobIsPricedAtItsZonesSpotPrice(t *testing.T) {
	t.Parallel()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(pricedConfig)) // g5.xlarge: on-demand 1.0, spot 0.5, overhead 0.2
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	e := newEnvWith(t, cfg, func(o *store.Options) { o.CostMetrics = &out })
	if err := e.st.PutSpotPrices(e.ctx, "gpu", cost.SpotPrices{ReadAt: e.clock.Now(), USD: map[string]float64{
		cost.SpotKey("g5.xlarge", "us-east-1a"): 0.8, cost.SpotKey("g5.xlarge", "us-east-1b"): 0.3,
	}}); err != nil {
		t.Fatal(err)
	}
	charge := func(price float64) float64 {
		return cost.Charge{PricePerHour: price, Slots: 1, Leased: 30 * time.Minute, Overhead: 0.2}.USD()
	}
	inB := e.runPriced("w1", "us-east-1b", "spot", "t1", 30*time.Minute)
	noHistory := e.runPriced("w2", "us-east-1c", "spot", "t2", 30*time.Minute)
	onDemand := e.runPriced("w3", "us-east-1b", "on-demand", "t1", 30*time.Minute)
	wantCost(t, "Spot in us-east-1b", inB, charge(0.3))
	wantCost(t, "Spot in a zone without history: the config's flat price", noHistory, charge(0.5))
	wantCost(t, "On-Demand: the config's price", onDemand, charge(1.0))

	// Prices read more than SpotPriceMaxAge before the outcome give way to
	// the flat price.
	e.clock.Advance(cost.SpotPriceMaxAge)
	wantCost(t, "Spot in us-east-1b with stale prices", e.runPriced("w4", "us-east-1b", "spot", "t2", 30*time.Minute), charge(0.5))

	// One line per priced job, however many relays ran: t1 paid w1's and
	// w3's jobs, t2 w2's and w4's.
	sums, n := tenantCosts(t, &out)
	if n != 4 {
		t.Fatalf("%d cost lines, want 4 (one per job)", n)
	}
	for tenant, want := range map[string]float64{"t1": charge(0.3) + charge(1.0), "t2": charge(0.5) * 2} {
		if d := sums[tenant] - want; d > 1e-9 || d < -1e-9 {
			t.Errorf("tenant %s: CostUSD sums to %v, want %v", tenant, sums[tenant], want)
		}
	}
}

func TestSpotPricesPriceAStageWithoutConfiguredPrices(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	e := newEnv(t, func(o *store.Options) { o.CostMetrics = &out }) // no prices in the config
	if err := e.st.PutSpotPrices(e.ctx, "gpu", cost.SpotPrices{ReadAt: e.clock.Now(), USD: map[string]float64{
		cost.SpotKey("g5.xlarge", "us-east-1a"): 0.42,
	}}); err != nil {
		t.Fatal(err)
	}
	wantCost(t, "Spot with history", e.runPriced("w1", "us-east-1a", "spot", "t1", time.Hour), 0.42)
	if c := e.runPriced("w2", "us-east-1a", "on-demand", "t1", time.Hour); c != nil {
		t.Errorf("On-Demand without a configured price: cost_usd = %v, want unpriced", *c)
	}
	if sums, n := tenantCosts(t, &out); n != 1 || sums["t1"] != 0.42 {
		t.Errorf("cost lines: %d summing to %v, want 1 of 0.42 (unpriced jobs write none)", n, sums)
	}
}

func TestSpotPricesAreReadBackAndCachedForAMinute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, table := testenv.DynamoDB(t)
	reader := store.New(client, store.Options{Table: table, Config: e.cfg, Clock: e.clock})
	writer := store.New(client, store.Options{Table: table, Config: e.cfg, Clock: e.clock})
	e.st = reader
	if p, err := e.st.SpotPrices(e.ctx, "gpu"); err != nil || len(p.USD) != 0 || !p.ReadAt.IsZero() {
		t.Fatalf("before any read: %+v, %v; want none", p, err)
	}
	read := e.clock.Now()
	if err := writer.PutSpotPrices(e.ctx, "gpu", cost.SpotPrices{ReadAt: read, USD: map[string]float64{"g5.xlarge/us-east-1a": 0.42}}); err != nil {
		t.Fatal(err)
	}
	// This process read "none" a moment ago and keeps it for a minute.
	if p, _ := e.st.SpotPrices(e.ctx, "gpu"); len(p.USD) != 0 {
		t.Fatalf("within the minute: %+v, want the cached empty read", p)
	}
	e.clock.Advance(time.Minute)
	p, err := e.st.SpotPrices(e.ctx, "gpu")
	if err != nil || p.USD["g5.xlarge/us-east-1a"] != 0.42 || !p.ReadAt.Equal(read) {
		t.Fatalf("after a minute: %+v, %v; want the written prices", p, err)
	}
	if other, err := e.st.SpotPrices(e.ctx, "other"); err != nil || len(other.USD) != 0 {
		t.Fatalf("another fleet: %+v, %v; want none", other, err)
	}
}
