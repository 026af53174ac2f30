package infra

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// network is the VPC the fleets run in: one the stack creates from
// network.vpc_cidr (public subnets in max_azs zones and no NAT gateway —
// workers only call out, and a NAT per zone would cost more than small
// fleets), or an existing one named by id, subnets and zones (no lookup).
func (s *Stack) network(cfg *fleetconfig.Config) (awsec2.IVpc, []*string, []subnetZone) {
	n := cfg.Network
	if n.VPCID != "" {
		vpc := awsec2.Vpc_FromVpcAttributes(s.Stack, jsii.String("Vpc"), &awsec2.VpcAttributes{
			VpcId: jsii.String(n.VPCID), AvailabilityZones: jsii.Strings(n.AvailabilityZones...),
			PublicSubnetIds: jsii.Strings(n.SubnetIDs...),
		})
		var zones []subnetZone
		for i, id := range n.SubnetIDs {
			if i < len(n.AvailabilityZones) {
				zones = append(zones, subnetZone{Subnet: id, Zone: n.AvailabilityZones[i]})
			}
		}
		return vpc, *jsii.Strings(n.SubnetIDs...), zones
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
	if len(n.AvailabilityZones) > 0 {
		// The config names the zones: zone names map to different physical
		// zones per account, and regions differ in which letters exist.
		props.AvailabilityZones = jsii.Strings(n.AvailabilityZones...)
	} else {
		// No account at synthesis: the stack takes the region's first two
		// zones from Fn::GetAZs at deploy time (every region has two).
		props.MaxAzs = jsii.Number(float64(maxAZs))
	}
	vpc := awsec2.NewVpc(s.Stack, jsii.String("Vpc"), props)
	vpc.AddFlowLog(jsii.String("FlowLogs"), &awsec2.FlowLogOptions{
		Destination: awsec2.FlowLogDestination_ToS3(s.logs, jsii.String("vpc-flow-logs/"), nil),
	})
	var subnets []*string
	var zones []subnetZone
	for _, sn := range *vpc.PublicSubnets() {
		subnets = append(subnets, sn.SubnetId())
		zones = append(zones, subnetZone{Subnet: *sn.SubnetId(), Zone: *sn.AvailabilityZone()})
	}
	return vpc, subnets, zones
}

// subnetZone is a subnet of the fleets' groups and its zone, as the scaler
// reads them from FLEETQ_SUBNETS (values may be deploy-time tokens).
type subnetZone struct {
	Subnet string `json:"subnet"`
	Zone   string `json:"zone"`
}

// WorkerLogFiles are the files each instance ships to its fleet's log
// group, by stream suffix: the boot script's output and the agent's.
var WorkerLogFiles = map[string]string{"boot": "/var/log/fleetq/boot.log", "worker": "/var/log/fleetq/worker.log"}

// SessionManagerActions are what the SSM agent needs for Session Manager
// (shell access without SSH or an inbound port), and nothing else of
// Systems Manager: unlike the managed AmazonSSMManagedInstanceCore, no
// ssm:GetParameter(s), so a job on the box cannot read the account's
// parameters.
var SessionManagerActions = []string{
	"ssm:UpdateInstanceInformation",
	"ssmmessages:CreateControlChannel", "ssmmessages:CreateDataChannel", "ssmmessages:OpenControlChannel", "ssmmessages:OpenDataChannel",
	"ec2messages:AcknowledgeMessage", "ec2messages:DeleteMessage", "ec2messages:FailMessage", "ec2messages:GetEndpoint",
	"ec2messages:GetMessages", "ec2messages:SendReply",
}

// sessionManager lets role's instances be reached by Session Manager.
// These actions have no resource-level permission but the instance's own
// (ssm:UpdateInstanceInformation), so "*" is the narrowest resource.
func sessionManager(role awsiam.Role) {
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("SessionManager"), Actions: jsii.Strings(SessionManagerActions...), Resources: jsii.Strings("*"),
	}))
}

// fleets builds, per fleet, the workers' role and instance profile, a log
// group, a launch template (IMDSv2 required, the agent fetched, verified
// and started by user data) and an all-Spot Auto Scaling Group that never
// picks its own scale-in victims.
//
// Each fleet has its own worker role: the API admits an attested
// registration into a fleet from that fleet's role only, so one fleet's
// instances can never register into another. A role may read exactly the
// agent objects of the stage, write its fleet's log group, mark an
// instance of its own fleet's groups unhealthy (the boot script does when the
// agent cannot be fetched or verified), and be reached by Session Manager
// instead of SSH. No role may read any secret: workers attest.
func (s *Stack) fleets(b *build, api awsapigatewayv2.HttpApi) []subnetZone {
	cfg := b.cfg
	vpc, subnets, zones := s.network(cfg)
	sg := awsec2.NewSecurityGroup(s.Stack, jsii.String("WorkerSG"), &awsec2.SecurityGroupProps{
		Vpc: vpc, Description: jsii.String("fleetq workers: no inbound, all outbound"), AllowAllOutbound: jsii.Bool(true),
	})
	s.workerRoles = map[string]awsiam.Role{}
	for _, f := range cfg.Fleets {
		id := camel(f.Slug)
		role := s.workerRole(b, id, f.Slug)
		s.workerRoles[f.Slug] = role
		profile := awsiam.NewCfnInstanceProfile(s.Stack, jsii.String(id+"WorkerProfile"), &awsiam.CfnInstanceProfileProps{Roles: &[]*string{role.RoleName()}})
		s.fleet(b, f, role, profile, sg, subnets, api)
	}
	return zones
}

// workerRole is the role of one fleet's instances.
func (s *Stack) workerRole(b *build, id, slug string) awsiam.Role {
	cfg := b.cfg
	role := awsiam.NewRole(s.Stack, jsii.String(id+"WorkerRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("ec2.amazonaws.com"), nil),
		Description: jsii.String("fleetq " + cfg.Stage + " fleet " + slug + "'s workers: attest, read the agent, write worker logs, report their own health, Session Manager"),
	})
	sessionManager(role)
	for _, a := range s.Agents {
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("s3:GetObject"),
			Resources: &[]*string{a.Asset.Bucket().ArnForObjects(a.Asset.S3ObjectKey())},
		}))
	}
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("autoscaling:SetInstanceHealth"),
		Resources: &[]*string{s.Stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("autoscaling"), Resource: jsii.String("autoScalingGroup"),
			ResourceName: jsii.String("*:autoScalingGroupName/fleetq-" + cfg.Stage + "-*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME})},
		Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{
			"aws:ResourceTag/" + TagStage: cfg.Stage, "aws:ResourceTag/" + TagFleet: slug}},
	}))
	return role
}

// fleet builds one fleet's log group, launch template and groups, its
// instances running as role.
func (s *Stack) fleet(b *build, f fleetconfig.Fleet, role awsiam.Role, profile awsiam.CfnInstanceProfile, sg awsec2.SecurityGroup, subnets []*string, api awsapigatewayv2.HttpApi) {
	cfg := b.cfg
	{
		id := camel(f.Slug)
		logs := awslogs.NewLogGroup(s.Stack, jsii.String(id+"WorkerLogs"), &awslogs.LogGroupProps{
			Retention: b.logRetention, RemovalPolicy: b.keep,
		})
		logs.GrantWrite(role)
		image := f.AMIID
		if image == "" {
			// EC2 resolves the parameter at launch: no lookup at synthesis.
			image = "resolve:ssm:" + f.AMISSMParameter
		}
		rootGB := f.RootVolumeGB
		if rootGB <= 0 {
			rootGB = 100
		}
		arch, _ := FleetArch(f) // checked when the agents were published
		data := awsec2.CfnLaunchTemplate_LaunchTemplateDataProperty{
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
			// Instances and their volumes are tagged at launch: Name, the
			// stage and fleet, and the cost-allocation tags of the config
			// (the group propagates the same to its instances).
			TagSpecifications: &[]interface{}{
				&awsec2.CfnLaunchTemplate_TagSpecificationProperty{ResourceType: jsii.String("instance"), Tags: launchTags(cfg, f)},
				&awsec2.CfnLaunchTemplate_TagSpecificationProperty{ResourceType: jsii.String("volume"), Tags: launchTags(cfg, f)},
			},
			UserData: awscdk.Fn_Base64(userData(cfg, f, s.Agents[arch], api.ApiEndpoint(), logs.LogGroupName())),
		}
		lt := awsec2.NewCfnLaunchTemplate(s.Stack, jsii.String(id+"Template"), &awsec2.CfnLaunchTemplateProps{LaunchTemplateData: &data})
		s.spotTemplates = append(s.spotTemplates, s.Stack.FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("ec2"), Resource: jsii.String("launch-template"), ResourceName: lt.Ref()}))
		var overrides []interface{}
		for _, t := range f.InstanceTypes {
			overrides = append(overrides, &awsautoscaling.CfnAutoScalingGroup_LaunchTemplateOverridesProperty{InstanceType: jsii.String(t)})
		}
		s.fleetGroup(cfg, f, lt, overrides, subnets, groupSpec{
			id: id + "Group", name: GroupName(cfg.Stage, f.Slug), min: f.MinInstances,
			// Spot rebalance recommendations launch a replacement early.
			capacityRebalance: true,
			distribution: &awsautoscaling.CfnAutoScalingGroup_InstancesDistributionProperty{
				OnDemandBaseCapacity:                jsii.Number(0),
				OnDemandPercentageAboveBaseCapacity: jsii.Number(0),
				SpotAllocationStrategy:              jsii.String("capacity-optimized-prioritized"),
			},
		})
		if hasOnDemandGroup(f) {
			s.onDemandGroup(cfg, f, id, lt, data, overrides, subnets)
		}
	}
}

// groupSpec is what differs between a fleet's groups: the Spot group and
// the On-Demand one beside it (ondemand.go).
type groupSpec struct {
	id, name          string
	min               int
	capacityRebalance bool
	distribution      *awsautoscaling.CfnAutoScalingGroup_InstancesDistributionProperty
	tags              []*awsautoscaling.CfnAutoScalingGroup_TagPropertyProperty
	// single, when set, is a launch template of one instance type the
	// group launches without a mixed instances policy (a group with a warm
	// pool may not have one).
	single awsec2.CfnLaunchTemplate
}

// fleetGroup is one Auto Scaling group of a fleet on its launch template,
// instance types and subnets. No DesiredCapacity: the group starts at its
// minimum and a stack update never resets what the scaler set. The scaler
// names every victim (instances are protected from scale-in); the
// terminate hook lets the interruption handler drain an instance first.
// Failed launches (no Spot capacity, a quota of 0) reach the alarm topic;
// every launch and termination the scaling topic.
func (s *Stack) fleetGroup(cfg *fleetconfig.Config, f fleetconfig.Fleet, lt awsec2.CfnLaunchTemplate, overrides []interface{}, subnets []*string, g groupSpec) awsautoscaling.CfnAutoScalingGroup {
	props := &awsautoscaling.CfnAutoScalingGroupProps{
		AutoScalingGroupName:             jsii.String(g.name),
		MinSize:                          jsii.String(fmt.Sprint(g.min)),
		MaxSize:                          jsii.String(fmt.Sprint(f.MaxInstances)),
		VpcZoneIdentifier:                &subnets,
		CapacityRebalance:                jsii.Bool(g.capacityRebalance),
		NewInstancesProtectedFromScaleIn: jsii.Bool(true),
		MixedInstancesPolicy: &awsautoscaling.CfnAutoScalingGroup_MixedInstancesPolicyProperty{
			InstancesDistribution: g.distribution,
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
		Tags: ptr(append(append([]*awsautoscaling.CfnAutoScalingGroup_TagPropertyProperty{
			{Key: jsii.String("Name"), Value: jsii.String(g.name), PropagateAtLaunch: jsii.Bool(true)},
			{Key: jsii.String(TagStage), Value: jsii.String(cfg.Stage), PropagateAtLaunch: jsii.Bool(true)},
			{Key: jsii.String(TagFleet), Value: jsii.String(f.Slug), PropagateAtLaunch: jsii.Bool(true)},
		}, g.tags...), groupTags(cfg, f)...)),
		NotificationConfigurations: &[]interface{}{
			&awsautoscaling.CfnAutoScalingGroup_NotificationConfigurationProperty{TopicArn: s.AlarmTopic.TopicArn(),
				NotificationTypes: jsii.Strings("autoscaling:EC2_INSTANCE_LAUNCH_ERROR", "autoscaling:EC2_INSTANCE_TERMINATE_ERROR")},
			&awsautoscaling.CfnAutoScalingGroup_NotificationConfigurationProperty{TopicArn: s.ScalingTopic.TopicArn(),
				NotificationTypes: jsii.Strings("autoscaling:EC2_INSTANCE_LAUNCH", "autoscaling:EC2_INSTANCE_TERMINATE")},
		},
	}
	if g.single != nil {
		props.MixedInstancesPolicy = nil
		props.LaunchTemplate = &awsautoscaling.CfnAutoScalingGroup_LaunchTemplateSpecificationProperty{
			LaunchTemplateId: g.single.Ref(), Version: g.single.AttrLatestVersionNumber(),
		}
	}
	group := awsautoscaling.NewCfnAutoScalingGroup(s.Stack, jsii.String(g.id), props)
	suppress(group, nagRule{ID: "CdkNagValidationFailure", AppliesTo: []string{"AwsSolutions-EC26"},
		Reason: "EC26 cannot read a launch template through a mixed instances policy; the template's root volume is encrypted (asserted by infra's tests)"})
	group.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY, nil)
	return group
}

// userData is the instances' boot script (a Fn::Sub template): it ships
// its own output and the agent's to the fleet's log group, fetches the
// agent (the stack's asset, else agent_url) and checks its SHA-256, and
// runs `fleetq worker` as a systemd unit. No secret is written to the
// instance: the agent attests with the instance profile's credentials. Any
// failure before the agent runs marks the instance unhealthy, so the group
// replaces it instead of paying for an instance that never registers.
func userData(cfg *fleetconfig.Config, f fleetconfig.Fleet, agent *AgentAsset, apiURL, logGroup *string) *string {
	runner := f.Agent.Runner
	if runner == "" {
		runner = "exec"
	}
	env := []string{
		"FLEETQ_FLEET=" + f.Slug,
		"FLEETQ_STAGE=" + cfg.Stage,
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
	// The warm-up (docs/worker.md, "Warm-up"): the agent runs it before it
	// registers, and a failed one marks the instance unhealthy.
	if w := f.Agent.Warmup; w.Enabled() {
		switch {
		case w.Workflow != "":
			env = append(env, "FLEETQ_WARMUP_WORKFLOW="+w.Workflow)
		case w.Exec != "":
			env = append(env, "FLEETQ_WARMUP_EXEC="+w.Exec)
		default:
			env = append(env, "FLEETQ_WARMUP_INPUT="+string(w.InputJSON()))
		}
		env = append(env, "FLEETQ_WARMUP_TIMEOUT="+w.Timeout.String())
	}
	var unit strings.Builder
	unit.WriteString("[Unit]\nDescription=fleetq worker\nAfter=network-online.target\nWants=network-online.target\n\n[Service]\n")
	for _, e := range env {
		// The config's values reach Fn::Sub: "${" must stay literal.
		fmt.Fprintf(&unit, "Environment=%s\n", strings.ReplaceAll(fmt.Sprintf("%q", e), "${", "${!"))
	}
	stop := int(f.Agent.DrainTimeout.Std().Seconds()) + 30
	// The agent exits 3 when it gave up on a sick machine (its jobs
	// requeued, the worker reported unhealthy): systemd must not restart
	// it onto the same GPU; the scaler replaces the instance.
	fmt.Fprintf(&unit, "Environment=\"FLEETQ_API=${ApiUrl}\"\n"+
		"ExecStart=/usr/local/bin/fleetq worker\n"+
		"StandardOutput=append:%s\nStandardError=inherit\n"+
		"Restart=on-failure\nRestartSec=5\nRestartPreventExitStatus=3\nKillMode=mixed\nTimeoutStopSec=%d\n\n[Install]\nWantedBy=multi-user.target\n", WorkerLogFiles["worker"], stop)

	vars := map[string]*string{"ApiUrl": apiURL, "LogGroup": logGroup, "Region": jsii.String(cfg.Region)}
	var fetch string
	switch {
	case cfg.AgentURL != "":
		vars["AgentUrl"] = jsii.String(cfg.AgentURL)
		get := "curl -fsSL --retry 5 -o \"$root/usr/local/bin/fleetq.new\" '${AgentUrl}'"
		if strings.HasPrefix(cfg.AgentURL, "s3://") {
			get = "aws s3 cp --only-show-errors '${AgentUrl}' \"$root/usr/local/bin/fleetq.new\""
		}
		fetch = get + " || unhealthy \"could not download the agent from ${AgentUrl}\"\n"
		if cfg.AgentSHA256 != "" {
			vars["AgentSha256"] = jsii.String(cfg.AgentSHA256)
			fetch += verify
		}
	default:
		vars["AgentUrl"], vars["AgentSha256"] = agent.Asset.S3ObjectUrl(), jsii.String(agent.SHA256)
		fetch = "fetched=no\nfor i in 1 2 3 4 5; do\n" +
			"  if aws s3 cp --only-show-errors '${AgentUrl}' \"$root/usr/local/bin/fleetq.new\"; then fetched=yes; break; fi\n" +
			"  sleep $((i * 5))\ndone\n" +
			"[ \"$fetched\" = yes ] || unhealthy \"could not download the agent from ${AgentUrl}\"\n" + verify
	}
	script := bootHead + fetch + bootAgent + "cat > \"$root/etc/systemd/system/fleetq-worker.service\" <<'UNIT'\n" + unit.String() + "UNIT\n" + bootTail
	return awscdk.Fn_Sub(jsii.String(script), &vars)
}

// The boot script's parts. Bash variables are written without braces:
// "${Name}" is Fn::Sub's, and "${!Name...}" reaches bash as "${Name...}".
const (
	bootHead = `#!/bin/bash
# fleetq worker boot: logs to CloudWatch, the agent fetched and verified,
# the agent started (it attests with the instance's own credentials: no
# secret on this machine). A failure marks the instance unhealthy so its
# group replaces it.
set -euo pipefail
# On an instance both are unset: the root is / and the metadata service
# EC2's. The boot script's test runs it in a scratch root against its own.
root=${!FLEETQ_BOOT_ROOT:-}
imds_url=${!FLEETQ_IMDS_URL:-http://169.254.169.254}
mkdir -p "$root/etc/fleetq" "$root/var/log/fleetq"
exec > >(tee -a "$root/var/log/fleetq/boot.log") 2>&1
export AWS_REGION=${Region} AWS_DEFAULT_REGION=${Region}
imds() {
  local t
  t=$(curl -fsS -X PUT "$imds_url/latest/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
  curl -fsS -H "X-aws-ec2-metadata-token: $t" "$imds_url/latest/meta-data/$1"
}
unhealthy() {
  echo "fleetq: $1; marking this instance unhealthy so its group replaces it" >&2
  sleep 20 # let the CloudWatch agent ship this line
  aws autoscaling set-instance-health --instance-id "$(imds instance-id)" --health-status Unhealthy --no-should-respect-grace-period ||
    shutdown -h now
  exit 1
}
trap 'unhealthy "the boot script failed at line $LINENO"' ERR
cw=$root/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl
[ -x "$cw" ] || dnf install -y -q amazon-cloudwatch-agent || yum install -y -q amazon-cloudwatch-agent || true
cat > "$root/etc/fleetq/cloudwatch-agent.json" <<'JSON'
{"logs":{"logs_collected":{"files":{"collect_list":[
  {"file_path":"/var/log/fleetq/boot.log","log_group_name":"${LogGroup}","log_stream_name":"{instance_id}/boot"},
  {"file_path":"/var/log/fleetq/worker.log","log_group_name":"${LogGroup}","log_stream_name":"{instance_id}/worker"}]}}}}
JSON
if [ -x "$cw" ]; then "$cw" -a fetch-config -m ec2 -s -c "file:$root/etc/fleetq/cloudwatch-agent.json" || echo "fleetq: the CloudWatch agent did not start; logs stay in /var/log/fleetq" >&2
else echo "fleetq: no CloudWatch agent on this AMI; logs stay in /var/log/fleetq" >&2; fi
`
	verify = `echo "${AgentSha256}  $root/usr/local/bin/fleetq.new" | sha256sum -c --quiet - || unhealthy "the agent from ${AgentUrl} does not have the SHA-256 ${AgentSha256}"
`
	bootAgent = `install -m 0755 "$root/usr/local/bin/fleetq.new" "$root/usr/local/bin/fleetq"
rm -f "$root/usr/local/bin/fleetq.new"
"$root/usr/local/bin/fleetq" version || unhealthy "the agent does not run on this instance"
`
	bootTail = `systemctl daemon-reload
systemctl enable --now fleetq-worker || unhealthy "the fleetq-worker unit did not start"
`
)

// camel turns a fleet slug into a construct id: video-a10g → VideoA10g.
func camel(slug string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(slug, func(r rune) bool { return r == '-' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// launchTags are the tags of a fleet's instances and volumes at launch:
// Name, fleetq:stage, fleetq:fleet, then the config's cost-allocation tags
// (the stage's with the fleet's), in key order.
func launchTags(cfg *fleetconfig.Config, f fleetconfig.Fleet) *[]*awscdk.CfnTag {
	tags := []*awscdk.CfnTag{
		{Key: jsii.String("Name"), Value: jsii.String(GroupName(cfg.Stage, f.Slug))},
		{Key: jsii.String(TagStage), Value: jsii.String(cfg.Stage)},
		{Key: jsii.String(TagFleet), Value: jsii.String(f.Slug)},
	}
	user := cfg.FleetTags(f)
	for _, k := range fleetconfig.SortedTagKeys(user) {
		tags = append(tags, &awscdk.CfnTag{Key: jsii.String(k), Value: jsii.String(user[k])})
	}
	return &tags
}

// groupTags are a fleet's cost-allocation tags on its group, propagated to
// the instances it launches.
func groupTags(cfg *fleetconfig.Config, f fleetconfig.Fleet) []*awsautoscaling.CfnAutoScalingGroup_TagPropertyProperty {
	user := cfg.FleetTags(f)
	var out []*awsautoscaling.CfnAutoScalingGroup_TagPropertyProperty
	for _, k := range fleetconfig.SortedTagKeys(user) {
		out = append(out, &awsautoscaling.CfnAutoScalingGroup_TagPropertyProperty{Key: jsii.String(k), Value: jsii.String(user[k]), PropagateAtLaunch: jsii.Bool(true)})
	}
	return out
}

func ptr[T any](v T) *T { return &v }
