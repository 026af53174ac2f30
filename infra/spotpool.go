package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// spotPools reports whether a fleet of the stage keeps a stopped Spot pool.
func spotPools(cfg *fleetconfig.Config) bool {
	for _, f := range cfg.Fleets {
		if f.SpotPool.Enabled() {
			return true
		}
	}
	return false
}

// grantSpotPool lets the scaler run the fleets' stopped Spot pools
// (pkg/aws/ec2pool, docs/scaling.md "Cold start: the Spot pool"), and the
// dispatch function start their instances when work arrives. The launch
// itself is grantLaunch's: from the stage's launch templates only, with
// iam:PassRole for the worker roles. Here: tagging the pool's Spot
// requests at launch, and starting, stopping, terminating instances and
// cancelling Spot requests that carry the stage's tag and the pool's
// (fleetq:pool=spot), which no group instance has. DescribeInstances has
// no resource-level permission.
func (b *build) grantSpotPool(fns functions) {
	if !spotPools(b.cfg) {
		return
	}
	arn := func(resource string) *string {
		return b.st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("ec2"), Resource: jsii.String(resource), ResourceName: jsii.String("*")})
	}
	pool := &map[string]interface{}{"StringEquals": map[string]interface{}{
		"aws:ResourceTag/" + TagStage: b.stage, "aws:ResourceTag/" + fleetconfig.TagPool: fleetconfig.TagPoolSpot}}
	describe := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{Actions: jsii.Strings("ec2:DescribeInstances"), Resources: jsii.Strings("*")})
	fns.scaler.AddToRolePolicy(describe)
	fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("SpotPoolInstances"), Actions: jsii.Strings("ec2:StartInstances", "ec2:StopInstances", "ec2:TerminateInstances"),
		Resources: &[]*string{arn("instance")}, Conditions: pool,
	}))
	fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("SpotPoolRequests"), Actions: jsii.Strings("ec2:CancelSpotInstanceRequests"),
		Resources: &[]*string{arn("spot-instances-request")}, Conditions: pool,
	}))
	// A pool launch tags its Spot request too (grantLaunch's TagAtLaunch
	// covers the instance and its volume).
	fns.scaler.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("TagSpotPoolRequestAtLaunch"), Actions: jsii.Strings("ec2:CreateTags"),
		Resources: &[]*string{arn("spot-instances-request")},
		Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{
			"ec2:CreateAction": "RunInstances", "aws:RequestTag/" + TagStage: b.stage}},
	}))
	fns.dispatch.AddToRolePolicy(describe)
	fns.dispatch.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("SpotPoolStart"), Actions: jsii.Strings("ec2:StartInstances"), Resources: &[]*string{arn("instance")}, Conditions: pool,
	}))
}
