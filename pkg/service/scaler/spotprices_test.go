package scaler_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fleetq/fleetq/pkg/aws/spotprice"
	"github.com/fleetq/fleetq/pkg/domain/jobevent"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

func TestTickRecordsEachZonesSpotPriceHourly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acct, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acct.Close() })
	acct.PutSpotPrice(localaws.SpotPrice{InstanceType: "g5.xlarge", Zone: "us-east-1a", USD: 0.45, At: t0.Add(-2 * time.Hour)})
	acct.PutSpotPrice(localaws.SpotPrice{InstanceType: "g5.xlarge", Zone: "us-east-1b", USD: 0.52, At: t0.Add(-time.Hour)})
	acct.PutSpotPrice(localaws.SpotPrice{InstanceType: "g6.xlarge", Zone: "us-east-1a", USD: 0.9, At: t0.Add(-time.Hour)}) // not the fleet's
	h.configure(func(c *scaler.Config) {
		c.SpotPrices = spotPricer(t, spotprice.Reader{EC2: ec2.NewFromConfig(localaws.Config(acct.URL))}, h.sys.Store)
	})

	want := func(when string, prices map[string]float64, readAt time.Time) {
		t.Helper()
		h.clock.Advance(time.Minute) // past the store's one-minute copy
		got, err := h.sys.Store.SpotPrices(h.ctx, "gpu")
		if err != nil {
			t.Fatal(err)
		}
		if !got.ReadAt.Equal(readAt) || len(got.USD) != len(prices) {
			t.Fatalf("%s: prices %v read at %v, want %v read at %v", when, got.USD, got.ReadAt, prices, readAt)
		}
		for k, v := range prices {
			if got.USD[k] != v {
				t.Errorf("%s: %s = %v, want %v", when, k, got.USD[k], v)
			}
		}
	}
	h.tick()
	first := h.clock.Now()
	want("first tick", map[string]float64{"g5.xlarge/us-east-1a": 0.45, "g5.xlarge/us-east-1b": 0.52}, first)

	// The price moves; ticks within the hour do not read it again.
	acct.PutSpotPrice(localaws.SpotPrice{InstanceType: "g5.xlarge", Zone: "us-east-1a", USD: 0.61, At: first.Add(time.Minute)})
	h.advance(58 * time.Minute)
	h.tick()
	want("within the hour", map[string]float64{"g5.xlarge/us-east-1a": 0.45, "g5.xlarge/us-east-1b": 0.52}, first)

	// Without permission the tick goes on and the prices last read stay.
	acct.Deny("DescribeSpotPriceHistory", true)
	h.tick() // an hour after the first read: due, refused
	want("refused", map[string]float64{"g5.xlarge/us-east-1a": 0.45, "g5.xlarge/us-east-1b": 0.52}, first)

	// Allowed again, the read is retried ten minutes after the refusal.
	acct.Deny("DescribeSpotPriceHistory", false)
	h.advance(8 * time.Minute)
	h.tick() // nine minutes after the refusal: not yet
	want("not yet retried", map[string]float64{"g5.xlarge/us-east-1a": 0.45, "g5.xlarge/us-east-1b": 0.52}, first)
	h.tick()
	retried := h.clock.Now()
	want("retried", map[string]float64{"g5.xlarge/us-east-1a": 0.61, "g5.xlarge/us-east-1b": 0.52}, retried)
}

type discard struct{}

func (discard) Publish(context.Context, []jobevent.Event) error { return nil }

// The prices the tick records are the ones a Spot job is charged: its
// instance type in its own zone.
func TestASpotJobPaysTheZonePriceTheTickRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	acct, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acct.Close() })
	acct.PutSpotPrice(localaws.SpotPrice{InstanceType: "g5.xlarge", Zone: "us-east-1a", USD: 0.8, At: t0.Add(-time.Hour)})
	acct.PutSpotPrice(localaws.SpotPrice{InstanceType: "g5.xlarge", Zone: "us-east-1b", USD: 0.3, At: t0.Add(-time.Hour)})
	h.configure(func(c *scaler.Config) {
		c.SpotPrices = spotPricer(t, spotprice.Reader{EC2: ec2.NewFromConfig(localaws.Config(acct.URL))}, h.sys.Store)
	})
	h.tick()

	a := worker.Auth{WorkerID: "w-b", Fleet: "gpu", TokenHash: "hash-b"}
	if _, err := h.sys.Store.RegisterWorker(h.ctx, worker.Registration{WorkerID: a.WorkerID, Fleet: "gpu", Stage: "test", InstanceID: "i-b",
		InstanceType: "g5.xlarge", AZ: "us-east-1b", PurchaseOption: "spot", MaxConcurrency: 1, TokenHash: a.TokenHash}); err != nil {
		t.Fatal(err)
	}
	h.submit(1, "z")
	j, err := h.sys.Store.LeaseNext(h.ctx, a, []string{"render"})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Hour)
	if err := h.sys.Store.Complete(h.ctx, a, j.ID, j.LeaseToken, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sys.Store.RelayJob(h.ctx, discard{}, j.ID); err != nil {
		t.Fatal(err)
	}
	got, err := h.sys.Store.GetJob(h.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Two hours at us-east-1b's $0.30 (no overhead, one slot); us-east-1a's
	// $0.80 would be 1.6, and no config price exists to fall back on.
	if got.CostUSD == nil || *got.CostUSD != 0.6 {
		t.Fatalf("cost_usd = %v, want 0.6", got.CostUSD)
	}
}

func spotPricer(t *testing.T, source scaler.SpotPriceSource, st scaler.SpotPriceStore) *scaler.SpotPricer {
	t.Helper()
	p, err := scaler.NewSpotPricer(source, st, scaler.SpotPricerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewSpotPricerNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	source := spotprice.Reader{}
	for want, build := range map[string]func() (*scaler.SpotPricer, error){
		"no Spot price source": func() (*scaler.SpotPricer, error) {
			return scaler.NewSpotPricer(nil, h.sys.Store, scaler.SpotPricerConfig{})
		},
		"no store": func() (*scaler.SpotPricer, error) {
			return scaler.NewSpotPricer(source, nil, scaler.SpotPricerConfig{})
		},
		"negative": func() (*scaler.SpotPricer, error) {
			return scaler.NewSpotPricer(source, h.sys.Store, scaler.SpotPricerConfig{Every: -time.Minute})
		},
	} {
		if p, err := build(); err == nil || p != nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, %v", want, p, err)
		}
	}
}
