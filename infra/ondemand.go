package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// TagRung tags the On-Demand group of a fleet with an On-Demand rung (and
// its instances) with RungOnDemand.
const (
	TagRung      = "fleetq:rung"
	RungOnDemand = "on-demand"
)

// OnDemandGroupName is the On-Demand group of a fleet with an On-Demand
// rung: the Spot group's name with -on-demand, inside fleetq-<stage>-* so
// the grants on the stage's groups cover it.
func OnDemandGroupName(stage, fleet string) string { return GroupName(stage, fleet) + "-on-demand" }

// onDemandGroupNames maps each fleet with an On-Demand rung or a bridge to
// its On-Demand group (FLEETQ_FLEET_ON_DEMAND_GROUPS; empty when no fleet
// has one).
func onDemandGroupNames(cfg *fleetconfig.Config) map[string]string {
	out := map[string]string{}
	for _, f := range cfg.Fleets {
		if hasOnDemandGroup(f) {
			out[f.Slug] = OnDemandGroupName(cfg.Stage, f.Slug)
		}
	}
	return out
}

// rungs reports whether any fleet has an On-Demand rung; bridges whether
// any has a bridge.
func rungs(cfg *fleetconfig.Config) bool {
	for _, f := range cfg.Fleets {
		if f.OnDemand.Enabled() {
			return true
		}
	}
	return false
}

func bridges(cfg *fleetconfig.Config) bool {
	for _, f := range cfg.Fleets {
		if f.Bridge.Enabled() {
			return true
		}
	}
	return false
}

// hasOnDemandGroup reports whether a fleet gets an On-Demand group: for its
// On-Demand rung, its bridge, or both.
func hasOnDemandGroup(f fleetconfig.Fleet) bool { return f.OnDemand.Enabled() || f.Bridge.Enabled() }

// onDemandPool is the warm pool of a fleet's On-Demand group: its bridge's
// (taking instances back on scale-in), else on_demand.warm_pool's.
func onDemandPool(f fleetconfig.Fleet) (size int, state string, reuse bool) {
	if b := f.Bridge; b.Enabled() {
		return b.Pool, b.PoolState(), true
	}
	return f.OnDemand.WarmPool.Size, f.OnDemand.WarmPool.PoolState(), false
}

// onDemandGroup is the second group of a fleet with an On-Demand rung
// (docs/scaling.md, "Fallback ladder"): the Spot group's launch template,
// instance types and subnets, every instance On-Demand, minimum 0 and the
// scaler setting its desired capacity. It has the Spot group's terminate
// hook and notifications, so the interruption handler drains its
// instances as it drains Spot ones, and the scaler names every victim.
//
// With on_demand.warm_pool the group keeps that many instances stopped (or
// hibernated) in an EC2 Auto Scaling warm pool. With a bridge (a fleet
// may have one without the rung: the group is then the bridge's alone) the
// pool holds bridge.pool instances less those running, and takes scaled-in
// instances back stopped (ReuseOnScaleIn), docs/scaling.md "Cold start". A warm pool may not sit on
// a group with a mixed instances policy, so such a group launches the
// fleet's first instance type from a launch template of its own (the
// fleet's template data with that type).
func (s *Stack) onDemandGroup(cfg *fleetconfig.Config, f fleetconfig.Fleet, id string, lt awsec2.CfnLaunchTemplate, data awsec2.CfnLaunchTemplate_LaunchTemplateDataProperty, overrides []interface{}, subnets []*string) {
	size, poolState, reuse := onDemandPool(f)
	var single awsec2.CfnLaunchTemplate
	if size > 0 {
		data.InstanceType = jsii.String(f.InstanceTypes[0])
		if poolState == fleetconfig.WarmPoolHibernated {
			data.HibernationOptions = &awsec2.CfnLaunchTemplate_HibernationOptionsProperty{Configured: jsii.Bool(true)}
		}
		single = awsec2.NewCfnLaunchTemplate(s.Stack, jsii.String(id+"OnDemandTemplate"), &awsec2.CfnLaunchTemplateProps{LaunchTemplateData: &data})
	}
	group := s.fleetGroup(cfg, f, lt, overrides, subnets, groupSpec{
		single: single,
		id:     id + "OnDemandGroup", name: OnDemandGroupName(cfg.Stage, f.Slug),
		distribution: &awsautoscaling.CfnAutoScalingGroup_InstancesDistributionProperty{
			OnDemandBaseCapacity:                jsii.Number(0),
			OnDemandPercentageAboveBaseCapacity: jsii.Number(100),
			// The config's instance types in order: the first that launches.
			OnDemandAllocationStrategy: jsii.String("prioritized"),
		},
		tags: []*awsautoscaling.CfnAutoScalingGroup_TagPropertyProperty{
			{Key: jsii.String(TagRung), Value: jsii.String(RungOnDemand), PropagateAtLaunch: jsii.Bool(true)},
		},
	})
	if size > 0 {
		state := "Stopped"
		if poolState == fleetconfig.WarmPoolHibernated {
			state = "Hibernated"
		}
		// The pool holds max(MinSize, MaxGroupPreparedCapacity - desired)
		// instances: with both at the size, exactly the size (left out, the
		// maximum would fill it up to the group's max size). A bridge's pool
		// has MinSize 0, so it holds the size less the bridges running and
		// the group launches no new instance into it while they run: each
		// comes back on scale-in.
		minSize := size
		if reuse {
			minSize = 0
		}
		pool := awsautoscaling.NewCfnWarmPool(s.Stack, jsii.String(id+"OnDemandWarmPool"), &awsautoscaling.CfnWarmPoolProps{
			AutoScalingGroupName:     group.Ref(),
			MinSize:                  jsii.Number(float64(minSize)),
			MaxGroupPreparedCapacity: jsii.Number(float64(size)),
			PoolState:                jsii.String(state),
			InstanceReusePolicy:      &awsautoscaling.CfnWarmPool_InstanceReusePolicyProperty{ReuseOnScaleIn: jsii.Bool(reuse)},
		})
		pool.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY, nil)
	}
}
