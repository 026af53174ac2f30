package infra

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// network is the VPC the fleets run in: one the stack creates from
// network.vpc_cidr (public subnets in max_azs zones and no NAT gateway —
// workers only call out, and a NAT per zone would cost more than small
// fleets), or an existing one named by id, subnets and zones (no lookup).
func (s *Stack) network(cfg *fleetconfig.Config) (awsec2.IVpc, []*string) {
	n := cfg.Network
	if n.VPCID != "" {
		vpc := awsec2.Vpc_FromVpcAttributes(s.Stack, jsii.String("Vpc"), &awsec2.VpcAttributes{
			VpcId: jsii.String(n.VPCID), AvailabilityZones: jsii.Strings(n.AvailabilityZones...),
			PublicSubnetIds: jsii.Strings(n.SubnetIDs...),
		})
		return vpc, *jsii.Strings(n.SubnetIDs...)
	}
	maxAZs := n.MaxAZs
	if maxAZs <= 0 {
		maxAZs = 3
	}
	props := &awsec2.VpcProps{
		IpAddresses: awsec2.IpAddresses_Cidr(jsii.String(n.VPCCIDR)),
		NatGateways: jsii.Number(0),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{{
			Name: jsii.String("workers"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(20),
		}},
	}
	// An account-agnostic stack cannot list a region's zones at synthesis;
	// name them from the region instead (every region has a, b and c).
	var zones []string
	for _, z := range []string{"a", "b", "c", "d", "e", "f"}[:min(maxAZs, 6)] {
		zones = append(zones, cfg.Region+z)
	}
	props.AvailabilityZones = jsii.Strings(zones...)
	vpc := awsec2.NewVpc(s.Stack, jsii.String("Vpc"), props)
	var subnets []*string
	for _, sn := range *vpc.PublicSubnets() {
		subnets = append(subnets, sn.SubnetId())
	}
	return vpc, subnets
}

// fleets builds, per fleet, an instance role that may only read the fleet
// secret, a launch template (IMDSv2 required, the agent started by user
// data), and an all-Spot Auto Scaling Group that never picks its own
// scale-in victims.
func (s *Stack) fleets(cfg *fleetconfig.Config, api awsapigatewayv2.HttpApi, secretParam string, secretARN *string) {
	vpc, subnets := s.network(cfg)
	sg := awsec2.NewSecurityGroup(s.Stack, jsii.String("WorkerSG"), &awsec2.SecurityGroupProps{
		Vpc: vpc, Description: jsii.String("fleetq workers: no inbound, all outbound"), AllowAllOutbound: jsii.Bool(true),
	})
	role := awsiam.NewRole(s.Stack, jsii.String("WorkerRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("ec2.amazonaws.com"), nil),
		Description: jsii.String("fleetq workers: read the fleet secret, nothing else"),
	})
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{Actions: jsii.Strings("ssm:GetParameter"), Resources: &[]*string{secretARN}}))
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings("kms:Decrypt"),
		Resources:  &[]*string{s.Stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("kms"), Resource: jsii.String("key"), ResourceName: jsii.String("*")})},
		Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{"kms:ViaService": "ssm." + cfg.Region + ".amazonaws.com"}},
	}))
	profile := awsiam.NewCfnInstanceProfile(s.Stack, jsii.String("WorkerProfile"), &awsiam.CfnInstanceProfileProps{Roles: &[]*string{role.RoleName()}})

	for _, f := range cfg.Fleets {
		id := camel(f.Slug)
		image := f.AMIID
		if image == "" {
			// EC2 resolves the parameter at launch: no lookup at synthesis.
			image = "resolve:ssm:" + f.AMISSMParameter
		}
		rootGB := f.RootVolumeGB
		if rootGB <= 0 {
			rootGB = 100
		}
		lt := awsec2.NewCfnLaunchTemplate(s.Stack, jsii.String(id+"Template"), &awsec2.CfnLaunchTemplateProps{
			LaunchTemplateName: jsii.String(GroupName(cfg.Stage, f.Slug)),
			LaunchTemplateData: &awsec2.CfnLaunchTemplate_LaunchTemplateDataProperty{
				ImageId:            jsii.String(image),
				IamInstanceProfile: &awsec2.CfnLaunchTemplate_IamInstanceProfileProperty{Arn: profile.AttrArn()},
				SecurityGroupIds:   &[]*string{sg.SecurityGroupId()},
				MetadataOptions: &awsec2.CfnLaunchTemplate_MetadataOptionsProperty{
					HttpTokens: jsii.String("required"), HttpEndpoint: jsii.String("enabled"), HttpPutResponseHopLimit: jsii.Number(2),
					InstanceMetadataTags: jsii.String("enabled"),
				},
				BlockDeviceMappings: &[]interface{}{&awsec2.CfnLaunchTemplate_BlockDeviceMappingProperty{
					DeviceName: jsii.String("/dev/xvda"),
					Ebs: &awsec2.CfnLaunchTemplate_EbsProperty{VolumeSize: jsii.Number(float64(rootGB)), VolumeType: jsii.String("gp3"),
						Encrypted: jsii.Bool(true), DeleteOnTermination: jsii.Bool(true)},
				}},
				UserData: awscdk.Fn_Base64(userData(cfg, f, api.ApiEndpoint(), secretParam)),
			},
		})
		var overrides []interface{}
		for _, t := range f.InstanceTypes {
			overrides = append(overrides, &awsautoscaling.CfnAutoScalingGroup_LaunchTemplateOverridesProperty{InstanceType: jsii.String(t)})
		}
		group := awsautoscaling.NewCfnAutoScalingGroup(s.Stack, jsii.String(id+"Group"), &awsautoscaling.CfnAutoScalingGroupProps{
			AutoScalingGroupName: jsii.String(GroupName(cfg.Stage, f.Slug)),
			MinSize:              jsii.String(fmt.Sprint(f.MinInstances)),
			MaxSize:              jsii.String(fmt.Sprint(f.MaxInstances)),
			// No DesiredCapacity: the group starts at its minimum (0), and a
			// stack update never resets what the scaler set.
			VpcZoneIdentifier: &subnets,
			CapacityRebalance: jsii.Bool(true),
			// The scaler names every victim; the group never chooses one.
			NewInstancesProtectedFromScaleIn: jsii.Bool(true),
			MixedInstancesPolicy: &awsautoscaling.CfnAutoScalingGroup_MixedInstancesPolicyProperty{
				InstancesDistribution: &awsautoscaling.CfnAutoScalingGroup_InstancesDistributionProperty{
					OnDemandBaseCapacity:                jsii.Number(0),
					OnDemandPercentageAboveBaseCapacity: jsii.Number(0),
					SpotAllocationStrategy:              jsii.String("capacity-optimized-prioritized"),
				},
				LaunchTemplate: &awsautoscaling.CfnAutoScalingGroup_LaunchTemplateProperty{
					LaunchTemplateSpecification: &awsautoscaling.CfnAutoScalingGroup_LaunchTemplateSpecificationProperty{
						LaunchTemplateId: lt.Ref(), Version: lt.AttrLatestVersionNumber(),
					},
					Overrides: &overrides,
				},
			},
			LifecycleHookSpecificationList: &[]interface{}{&awsautoscaling.CfnAutoScalingGroup_LifecycleHookSpecificationProperty{
				LifecycleHookName:   jsii.String(LifecycleHook),
				LifecycleTransition: jsii.String("autoscaling:EC2_INSTANCE_TERMINATING"),
				HeartbeatTimeout:    jsii.Number(300),
				DefaultResult:       jsii.String("CONTINUE"),
			}},
			Tags: &[]*awsautoscaling.CfnAutoScalingGroup_TagPropertyProperty{
				{Key: jsii.String(TagStage), Value: jsii.String(cfg.Stage), PropagateAtLaunch: jsii.Bool(true)},
				{Key: jsii.String(TagFleet), Value: jsii.String(f.Slug), PropagateAtLaunch: jsii.Bool(true)},
			},
		})
		group.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY, nil)
	}
}

// userData installs the agent and runs it as a systemd unit.
func userData(cfg *fleetconfig.Config, f fleetconfig.Fleet, apiURL *string, secretParam string) *string {
	runner := f.Agent.Runner
	if runner == "" {
		runner = "exec"
	}
	env := []string{
		"FLEETQ_FLEET=" + f.Slug,
		"FLEETQ_STAGE=" + cfg.Stage,
		"FLEETQ_FLEET_SECRET_SSM=" + secretParam,
		"FLEETQ_RUNNER=" + runner,
		fmt.Sprintf("FLEETQ_MAX_CONCURRENCY=%d", max(1, f.SlotsPerInstance)),
		"FLEETQ_DRAIN_TIMEOUT=" + f.Agent.DrainTimeout.String(),
		"AWS_REGION=" + cfg.Region,
	}
	if f.Agent.Exec != "" {
		env = append(env, "FLEETQ_EXEC="+f.Agent.Exec)
	}
	if f.Agent.ComfyUIURL != "" {
		env = append(env, "FLEETQ_COMFYUI_URL="+f.Agent.ComfyUIURL)
	}
	var unit strings.Builder
	unit.WriteString("[Unit]\nDescription=fleetq worker\nAfter=network-online.target\nWants=network-online.target\n\n[Service]\n")
	for _, e := range env {
		fmt.Fprintf(&unit, "Environment=%q\n", e)
	}
	stop := int(f.Agent.DrainTimeout.Std().Seconds()) + 30
	fmt.Fprintf(&unit, "EnvironmentFile=/etc/fleetq/api.env\nExecStart=/usr/local/bin/fleetq worker\nRestart=on-failure\nRestartSec=5\nKillMode=mixed\nTimeoutStopSec=%d\n\n[Install]\nWantedBy=multi-user.target\n", stop)
	head := "#!/bin/bash\nset -euo pipefail\nmkdir -p /etc/fleetq\n" +
		"curl -fsSL --retry 5 -o /usr/local/bin/fleetq '" + cfg.AgentURL + "'\nchmod 0755 /usr/local/bin/fleetq\n" +
		"echo \"FLEETQ_API="
	tail := "\" > /etc/fleetq/api.env\ncat > /etc/systemd/system/fleetq-worker.service <<'UNIT'\n" + unit.String() + "UNIT\n" +
		"systemctl daemon-reload\nsystemctl enable --now fleetq-worker\n"
	return awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String(head), apiURL, jsii.String(tail)})
}

// camel turns a fleet slug into a construct id: video-a10g → VideoA10g.
func camel(slug string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(slug, func(r rune) bool { return r == '-' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}
