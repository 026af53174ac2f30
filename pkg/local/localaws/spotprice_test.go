package localaws_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/fleetq/fleetq/pkg/local/localaws"
)

func startAccount(t *testing.T) *localaws.Account {
	t.Helper()
	a, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func TestDescribeSpotPriceHistoryThroughTheSDK(t *testing.T) {
	a := startAccount(t)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, p := range []localaws.SpotPrice{
		{InstanceType: "g5.xlarge", Zone: "us-east-1a", USD: 0.40, At: now.Add(-3 * time.Hour)},
		{InstanceType: "g5.xlarge", Zone: "us-east-1a", USD: 0.4521, At: now.Add(-time.Hour)}, // in force at now
		{InstanceType: "g5.xlarge", Zone: "us-east-1b", USD: 0.51, At: now.Add(-2 * time.Hour)},
		{InstanceType: "g5.xlarge", Zone: "us-east-1b", ProductDescription: "Windows", USD: 0.9, At: now.Add(-time.Hour)},
		{InstanceType: "g6.xlarge", Zone: "us-east-1a", USD: 0.6, At: now.Add(-time.Hour)},
	} {
		a.PutSpotPrice(p)
	}
	c := ec2.NewFromConfig(localaws.Config(a.URL))
	in := &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       []ec2types.InstanceType{"g5.xlarge"},
		ProductDescriptions: []string{"Linux/UNIX"},
		StartTime:           aws.Time(now),
		MaxResults:          aws.Int32(1), // one per page: the paginator follows nextToken
	}
	var got []ec2types.SpotPrice
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(c, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.SpotPriceHistory...)
	}
	// Per zone, the change in force at StartTime; newest first.
	if len(got) != 2 {
		t.Fatalf("got %d prices, want 2: %+v", len(got), got)
	}
	want := []struct {
		zone, price string
		at          time.Time
	}{{"us-east-1a", "0.452100", now.Add(-time.Hour)}, {"us-east-1b", "0.510000", now.Add(-2 * time.Hour)}}
	for i, w := range want {
		g := got[i]
		if aws.ToString(g.AvailabilityZone) != w.zone || aws.ToString(g.SpotPrice) != w.price || !aws.ToTime(g.Timestamp).Equal(w.at) ||
			g.InstanceType != "g5.xlarge" || g.ProductDescription != "Linux/UNIX" {
			t.Errorf("price %d = %s %s %s %v %s, want %s %s at %v", i, g.InstanceType, aws.ToString(g.AvailabilityZone),
				aws.ToString(g.SpotPrice), aws.ToTime(g.Timestamp), g.ProductDescription, w.zone, w.price, w.at)
		}
	}
	// Without StartTime, the whole history of the filter.
	all, err := c.DescribeSpotPriceHistory(context.Background(), &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []ec2types.InstanceType{"g5.xlarge"}})
	if err != nil || len(all.SpotPriceHistory) != 4 {
		t.Fatalf("whole history: %v, %d entries; want 4", err, len(all.SpotPriceHistory))
	}
}

func TestDeniedSpotPriceHistoryIsUnauthorizedOperation(t *testing.T) {
	a := startAccount(t)
	a.Deny("DescribeSpotPriceHistory", true)
	_, err := ec2.NewFromConfig(localaws.Config(a.URL)).DescribeSpotPriceHistory(context.Background(), &ec2.DescribeSpotPriceHistoryInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "UnauthorizedOperation" {
		t.Fatalf("err = %v, want UnauthorizedOperation", err)
	}
	a.Deny("DescribeSpotPriceHistory", false)
	if _, err := ec2.NewFromConfig(localaws.Config(a.URL)).DescribeSpotPriceHistory(context.Background(), &ec2.DescribeSpotPriceHistoryInput{}); err != nil {
		t.Fatalf("allowed again: %v", err)
	}
}
