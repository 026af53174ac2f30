// Package spotprice reads the current Spot price of instance types in each
// availability zone from EC2's DescribeSpotPriceHistory, for the cost of
// each job (docs/scaling.md, "Cost per job").
package spotprice

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetq/fleetq/pkg/domain/cost"
)

// ProductDescription is the product whose prices are read: Linux on
// instances in a VPC, which is what fleetq's workers are.
const ProductDescription = "Linux/UNIX"

// API is the part of the EC2 API the reader uses; *ec2.Client satisfies it.
type API interface {
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// Reader reads Spot prices through EC2.
type Reader struct {
	EC2 API
}

// SpotPrices answers the Spot price history of the instance types in force
// at at: with StartTime at, EC2 answers each type and zone's last change
// before it and any after. Every page is read.
func (r Reader) SpotPrices(ctx context.Context, instanceTypes []string, at time.Time) ([]cost.SpotPoint, error) {
	if len(instanceTypes) == 0 {
		return nil, nil
	}
	in := &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{ProductDescription},
		StartTime:           aws.Time(at),
	}
	for _, t := range instanceTypes {
		in.InstanceTypes = append(in.InstanceTypes, ec2types.InstanceType(t))
	}
	var out []cost.SpotPoint
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(r.EC2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe Spot price history: %w", err)
		}
		for _, p := range page.SpotPriceHistory {
			usd, err := strconv.ParseFloat(aws.ToString(p.SpotPrice), 64)
			if err != nil {
				return nil, fmt.Errorf("Spot price %q of %s in %s: not a number", aws.ToString(p.SpotPrice), p.InstanceType, aws.ToString(p.AvailabilityZone))
			}
			out = append(out, cost.SpotPoint{InstanceType: string(p.InstanceType), Zone: aws.ToString(p.AvailabilityZone),
				USD: usd, At: aws.ToTime(p.Timestamp)})
		}
	}
	return out, nil
}
