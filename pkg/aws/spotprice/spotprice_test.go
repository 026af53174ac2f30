package spotprice_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fleetq/fleetq/pkg/aws/spotprice"
	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

func TestReaderAnswersThePriceInForcePerZone(t *testing.T) {
	acct, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acct.Close() })
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, p := range []localaws.SpotPrice{
		{InstanceType: "g5.xlarge", Zone: "us-east-1a", USD: 0.41, At: now.Add(-5 * time.Hour)},
		{InstanceType: "g5.xlarge", Zone: "us-east-1a", USD: 0.4521, At: now.Add(-2 * time.Hour)},
		{InstanceType: "g5.xlarge", Zone: "us-east-1b", USD: 0.5, At: now.Add(-3 * time.Hour)},
		{InstanceType: "g5.xlarge", Zone: "us-east-1b", ProductDescription: "Windows", USD: 1.2, At: now.Add(-time.Hour)},
		{InstanceType: "g6.xlarge", Zone: "us-east-1a", USD: 0.7, At: now.Add(-time.Hour)},
		{InstanceType: "p5.48xlarge", Zone: "us-east-1a", USD: 30, At: now.Add(-time.Hour)}, // not asked for
	} {
		acct.PutSpotPrice(p)
	}
	points, err := spotprice.Reader{EC2: ec2.NewFromConfig(localaws.Config(acct.URL))}.SpotPrices(context.Background(), []string{"g5.xlarge", "g6.xlarge"}, now)
	if err != nil {
		t.Fatal(err)
	}
	got := cost.LatestSpot(points, now).USD
	want := map[string]float64{"g5.xlarge/us-east-1a": 0.4521, "g5.xlarge/us-east-1b": 0.5, "g6.xlarge/us-east-1a": 0.7}
	if len(got) != len(want) {
		t.Fatalf("prices = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestReaderReportsARefusal(t *testing.T) {
	acct, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acct.Close() })
	acct.Deny("DescribeSpotPriceHistory", true)
	if _, err := (spotprice.Reader{EC2: ec2.NewFromConfig(localaws.Config(acct.URL))}).SpotPrices(context.Background(), []string{"g5.xlarge"}, time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)); err == nil {
		t.Fatal("a denied DescribeSpotPriceHistory read as no prices")
	}
}
