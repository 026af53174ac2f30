package infra_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/infra"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// userData returns each launch template's user data (the Fn::Sub template
// and its variables) as JSON text, by logical id.
func (s synthesized) userData(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for id, lt := range s.resources("AWS::EC2::LaunchTemplate") {
		b, err := json.Marshal(lt["LaunchTemplateData"].(map[string]any)["UserData"])
		if err != nil {
			t.Fatal(err)
		}
		out[id] = string(b)
	}
	return out
}

// statements returns every statement of the template's IAM policies whose
// actions include action.
func (s synthesized) statements(action string) []map[string]any {
	var out []map[string]any
	for _, p := range s.resources("AWS::IAM::Policy") {
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			stmt := st.(map[string]any)
			var actions []any
			switch a := stmt["Action"].(type) {
			case string:
				actions = []any{a}
			case []any:
				actions = a
			}
			if slices.Contains(actions, any(action)) {
				out = append(out, stmt)
			}
		}
	}
	return out
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The agent ships with the stack: the prod fleets (all x86_64) get the
// amd64 binary as an S3 asset; the user data fetches it by the asset's
// location, checks the digest computed at synthesis, and marks the
// instance unhealthy when either fails; the worker role reads exactly the
// asset's object.
func TestAgentShipsWithTheStack(t *testing.T) {
	s := synth(t, "prod")
	cfg, _, err := infra.LoadConfig("prod", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.stack.Agents) != 1 || s.stack.Agents["amd64"] == nil {
		t.Fatalf("agents %v, want amd64 only (g5 and g6 are x86_64)", s.stack.Agents)
	}
	a := s.stack.Agents["amd64"]
	if a.SHA256 != s.agentSHA256["amd64"] || a.Placeholder {
		t.Fatalf("agent digest %s (placeholder %v), want the built binary's %s", a.SHA256, a.Placeholder, s.agentSHA256["amd64"])
	}
	outputs := s.json["Outputs"].(map[string]any)
	if got := outputs["AgentAmd64Sha256"].(map[string]any)["Value"]; got != a.SHA256 {
		t.Errorf("output AgentAmd64Sha256 = %v, want %s", got, a.SHA256)
	}
	if _, ok := outputs["AgentArm64Sha256"]; ok {
		t.Error("an arm64 agent is published though no fleet needs it")
	}
	assetURL := jsonText(t, s.json["Outputs"].(map[string]any)["AgentAmd64Url"].(map[string]any)["Value"])
	for id, ud := range s.userData(t) {
		for _, want := range []string{
			`"AgentSha256":"` + a.SHA256 + `"`,
			`sha256sum -c`,
			`aws s3 cp --only-show-errors '${AgentUrl}'`,
			`set-instance-health --instance-id`, `--health-status Unhealthy`,
			`trap 'unhealthy`,
			`\"$root/usr/local/bin/fleetq\" version || unhealthy`,
		} {
			if !strings.Contains(ud, want) {
				t.Errorf("%s: user data lacks %s", id, want)
			}
		}
		// The user data's AgentUrl is the asset's location (as in the output).
		if !strings.Contains(ud, `"AgentUrl":`+assetURL) {
			t.Errorf("%s: user data does not fetch the asset %s:\n%s", id, assetURL, ud)
		}
	}
	gets := s.statements("s3:GetObject")
	var workerGets []string
	for _, st := range gets {
		r := jsonText(t, st["Resource"])
		if strings.Contains(r, "cdk-hnb659fds-assets") {
			workerGets = append(workerGets, r)
		}
	}
	// One grant per fleet's worker role.
	if len(workerGets) != len(cfg.Fleets) {
		t.Fatalf("read grants on the asset bucket %v, want one per fleet's worker role", workerGets)
	}
	for _, g := range workerGets {
		if !strings.Contains(g, *a.Asset.S3ObjectKey()) || strings.Contains(g, "*") {
			t.Fatalf("read grants on the asset bucket %v, want exactly the object %s", workerGets, *a.Asset.S3ObjectKey())
		}
	}
	health := s.statements("autoscaling:SetInstanceHealth")
	if len(health) != len(cfg.Fleets) {
		t.Fatalf("SetInstanceHealth grants %v, want one per fleet's worker role", health)
	}
	for i, f := range cfg.Fleets {
		found := false
		for _, h := range health {
			text := jsonText(t, h)
			if !strings.Contains(text, `"aws:ResourceTag/fleetq:stage":"prod"`) {
				t.Fatalf("SetInstanceHealth grants %v, want them scoped to the stage's groups", health)
			}
			found = found || strings.Contains(text, `"aws:ResourceTag/fleetq:fleet":"`+f.Slug+`"`)
		}
		if !found {
			t.Fatalf("SetInstanceHealth grants %v, want fleet %d's scoped to its own groups (tag fleetq:fleet=%s)", health, i, f.Slug)
		}
	}
}

// An arm64 fleet gets the arm64 agent; the architectures come from the
// instance types, and a fleet that cannot run one agent is refused.
func TestAgentArchitecture(t *testing.T) {
	for typ, want := range map[string]string{
		"g5.xlarge": "amd64", "g4dn.xlarge": "amd64", "p4d.24xlarge": "amd64", "g6e.2xlarge": "amd64", "m7i.large": "amd64",
		"g5g.xlarge": "arm64", "c7gn.large": "arm64", "m7gd.large": "arm64", "t4g.small": "arm64", "r8g.medium": "arm64",
	} {
		if got, err := infra.Arch(typ); err != nil || got != want {
			t.Errorf("Arch(%s) = %s, %v; want %s", typ, got, err, want)
		}
	}
	if _, err := infra.Arch("mac2.metal"); err == nil {
		t.Error("Arch accepted a Mac instance type")
	}
	mixed := fleetconfig.Fleet{Slug: "x", InstanceTypes: []string{"g5.xlarge", "g5g.xlarge"}}
	if _, err := infra.FleetArch(mixed); err == nil || !strings.Contains(err.Error(), "mixes amd64 and arm64") {
		t.Errorf("mixed fleet: %v", err)
	}
	wrongAMI := fleetconfig.Fleet{Slug: "x", InstanceTypes: []string{"g5g.xlarge"},
		AMISSMParameter: "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id"}
	if _, err := infra.FleetArch(wrongAMI); err == nil || !strings.Contains(err.Error(), "x86_64 image") {
		t.Errorf("arm64 fleet on an x86_64 AMI: %v", err)
	}
}

// Synthesis refuses what cannot work: functions or the agent not built
// (without allowPlaceholders), an instance type whose architecture is not
// the AMI's, and a CLI region other than the config's.
func TestSynthesisRefusesWhatCannotWork(t *testing.T) {
	cfg, raw, err := infra.LoadConfig("dev", "")
	if err != nil {
		t.Fatal(err)
	}
	newStack := func(o infra.Options) error {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
		_, err := infra.New(app, o)
		return err
	}
	err = newStack(infra.Options{Config: cfg, ConfigYAML: raw, BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), "bootstrap") {
		t.Errorf("no function binaries: %v", err)
	}
	bin := t.TempDir()
	for _, f := range infra.Functions {
		if err := os.MkdirAll(filepath.Join(bin, f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, f, "bootstrap"), []byte("binary"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err = newStack(infra.Options{Config: cfg, ConfigYAML: raw, BinDir: bin})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(bin, "agent", "amd64", "fleetq")) || !strings.Contains(err.Error(), "make build") {
		t.Errorf("functions built, no agent: %v", err)
	}

	armText := regexp.MustCompile(`instance_types: \[[^\]]*\]`).ReplaceAllString(string(raw), "instance_types: [g5g.xlarge, g5g.2xlarge]")
	arm, err := fleetconfig.Parse("arm.yaml", []byte(armText))
	if err != nil {
		t.Fatal(err)
	}
	if arm.Fleets[0].InstanceTypes[0] != "g5g.xlarge" {
		t.Fatalf("the dev config's instance types changed: %v", arm.Fleets[0].InstanceTypes)
	}
	agents, _ := agentDir(t)
	err = newStack(infra.Options{Config: arm, ConfigYAML: raw, AgentDir: agents, AllowPlaceholders: true})
	if err == nil || !strings.Contains(err.Error(), "x86_64 image") {
		t.Errorf("arm64 instance type on the x86_64 AMI: %v", err)
	}

	if err := infra.CheckRegion(cfg, "eu-west-1"); err == nil || !strings.Contains(err.Error(), "us-east-1") || !strings.Contains(err.Error(), "eu-west-1") {
		t.Errorf("region mismatch: %v", err)
	}
	if err := infra.CheckRegion(cfg, cfg.Region); err != nil {
		t.Errorf("same region: %v", err)
	}
	if err := infra.CheckRegion(cfg, ""); err != nil {
		t.Errorf("no CLI region (synthesis without the CLI): %v", err)
	}
}

// Workers attest: no worker role may read any secret and no user data
// fetches one. A fleet whose config accepts a secret gets one of its own
// (generated, no fixed name) that only the API reads, and the API is told
// where each fleet's secret is.
func TestNoSecretOnInstancesAndFleetSecretsPerFleet(t *testing.T) {
	s := synth(t, "dev")
	for id := range s.resources("AWS::SecretsManager::Secret") {
		for _, reader := range s.readersOf(t, id) {
			if strings.Contains(reader, "WorkerRole") {
				t.Errorf("worker role %s may read secret %s", reader, id)
			}
		}
	}
	for id, ud := range s.userData(t) {
		for _, banned := range []string{"secretsmanager", "get-secret-value", "fetch-secret", "FLEET_SECRET", "SecretArn"} {
			if strings.Contains(ud, banned) {
				t.Errorf("%s: user data mentions %q: no secret is on an instance:\n%s", id, banned, ud)
			}
		}
	}
	secrets := s.secretsFor("register into fleet demo")
	if len(secrets) != 1 {
		t.Fatalf("%d secrets of fleet demo, want 1", len(secrets))
	}
	for id, p := range secrets {
		gen, _ := p["GenerateSecretString"].(map[string]any)
		if gen == nil || gen["PasswordLength"] != float64(48) || gen["ExcludePunctuation"] != true {
			t.Errorf("secret %s is not generated: %v", id, p)
		}
		if _, named := p["Name"]; named {
			t.Errorf("secret %s has a fixed name: a failed first deploy could not be redeployed", id)
		}
		if got, want := s.readersOf(t, id), []string{s.roleOf(t, "fleetq-dev-api")}; !slices.Equal(got, want) {
			t.Errorf("secret %s is read by %v, want only the API's role %v", id, got, want)
		}
		env := s.functionEnv(t, "fleetq-dev-api")
		if !strings.Contains(jsonText(t, env["FLEETQ_FLEET_SECRETS"]), `{"Ref":"`+id+`"}`) {
			t.Errorf("the API's FLEETQ_FLEET_SECRETS = %s, want fleet demo's secret %s", jsonText(t, env["FLEETQ_FLEET_SECRETS"]), id)
		}
	}
	if ssm := s.statements("ssm:GetParameter"); len(ssm) != 0 {
		t.Errorf("something still reads an SSM parameter: %v", ssm)
	}
	// prod's fleets accept no secret: none is created, none is read.
	prod := synth(t, "prod")
	if got := prod.secretsFor("register into fleet"); len(got) != 0 {
		t.Errorf("prod has fleet secrets %v; its fleets attest only", got)
	}
	if _, ok := prod.functionEnv(t, "fleetq-prod-api")["FLEETQ_FLEET_SECRETS"]; ok {
		t.Error("prod's API is given fleet secrets")
	}
}

// Each fleet has a worker role of its own, used by the instance profile
// of its launch templates; the API is told each fleet's role and groups,
// and may find an instance's group.
func TestOneWorkerRolePerFleet(t *testing.T) {
	s := synth(t, "prod")
	cfg, _, err := infra.LoadConfig("prod", "")
	if err != nil {
		t.Fatal(err)
	}
	roles := s.resources("AWS::IAM::Role")
	profiles := s.resources("AWS::IAM::InstanceProfile")
	env := s.functionEnv(t, "fleetq-prod-api")
	for _, f := range cfg.Fleets {
		id := ""
		for rid := range roles {
			if strings.HasPrefix(rid, camelSlug(f.Slug)+"WorkerRole") {
				id = rid
			}
		}
		if id == "" {
			t.Fatalf("fleet %s has no worker role of its own (roles %v)", f.Slug, keys(roles))
		}
		profile := ""
		for pid, p := range profiles {
			if jsonText(t, p["Roles"]) == jsonText(t, []any{map[string]any{"Ref": id}}) {
				profile = pid
			}
		}
		if profile == "" {
			t.Fatalf("no instance profile of fleet %s's role %s", f.Slug, id)
		}
		for ltID, lt := range s.resources("AWS::EC2::LaunchTemplate") {
			if !strings.HasPrefix(ltID, camelSlug(f.Slug)) {
				continue
			}
			got := jsonText(t, lt["LaunchTemplateData"].(map[string]any)["IamInstanceProfile"])
			if !strings.Contains(got, `"`+profile+`"`) {
				t.Errorf("launch template %s of fleet %s runs as %s, want profile %s", ltID, f.Slug, got, profile)
			}
		}
		if roleEnv := jsonText(t, env["FLEETQ_WORKER_ROLES"]); !strings.Contains(roleEnv, `"`+id+`"`) || !strings.Contains(roleEnv, f.Slug) {
			t.Errorf("the API's FLEETQ_WORKER_ROLES %s does not name fleet %s's role %s", roleEnv, f.Slug, id)
		}
		if groups := jsonText(t, env["FLEETQ_FLEET_GROUPS"]); !strings.Contains(groups, infra.GroupName("prod", f.Slug)) {
			t.Errorf("the API's FLEETQ_FLEET_GROUPS %s lacks fleet %s's group", groups, f.Slug)
		}
	}
	if len(s.statements("autoscaling:DescribeAutoScalingInstances")) == 0 {
		t.Error("the API may not find an instance's group")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// camelSlug is a fleet slug as the stack's construct ids spell it.
func camelSlug(slug string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(slug, func(r rune) bool { return r == '-' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// functionEnv is a function's environment variables.
func (s synthesized) functionEnv(t *testing.T, function string) map[string]any {
	t.Helper()
	for _, f := range s.resources("AWS::Lambda::Function") {
		if f["FunctionName"] == function {
			return f["Environment"].(map[string]any)["Variables"].(map[string]any)
		}
	}
	t.Fatalf("no function %s", function)
	return nil
}

// Every alarm notifies the stage's topic, when it fires and when it
// clears; the config's emails subscribe to it; each fleet's oldest-job
// alarm fires past the fleet's queue_slo.
func TestAlarmsReachSomeone(t *testing.T) {
	cfg, raw, err := infra.LoadConfig("dev", "")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(raw), "  emails: []", "  emails: [oncall@example.com, ops@example.com]", 1)
	custom, err := fleetconfig.Parse("alarms.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(custom.Alarms.Emails) != 2 {
		t.Fatalf("the dev config's alarms block changed: %v", custom.Alarms)
	}
	s := synthConfig(t, "dev-alarm-emails", custom, []byte(text))
	var topic string
	for id, p := range s.resources("AWS::SNS::Topic") {
		if p["DisplayName"] == "fleetq dev alarms" {
			topic = id
		}
	}
	if topic == "" {
		t.Fatal("no alarm topic")
	}
	var emails []string
	for _, sub := range s.resources("AWS::SNS::Subscription") {
		if sub["Protocol"] == "email" && jsonText(t, sub["TopicArn"]) == `{"Ref":"`+topic+`"}` {
			emails = append(emails, sub["Endpoint"].(string))
		}
	}
	slices.Sort(emails)
	if !slices.Equal(emails, custom.Alarms.Emails) {
		t.Errorf("email subscriptions %v, want %v", emails, custom.Alarms.Emails)
	}
	alarms := s.resources("AWS::CloudWatch::Alarm")
	if len(alarms) == 0 {
		t.Fatal("no alarms")
	}
	for id, a := range alarms {
		want := `[{"Ref":"` + topic + `"}]`
		if jsonText(t, a["AlarmActions"]) != want || jsonText(t, a["OKActions"]) != want {
			t.Errorf("alarm %s notifies %v / %v, want the topic", id, a["AlarmActions"], a["OKActions"])
		}
	}
	// Failed launches (no Spot capacity, a quota of 0) reach the topic too.
	for id, g := range s.resources("AWS::AutoScaling::AutoScalingGroup") {
		var errorsTo []string
		for _, n := range g["NotificationConfigurations"].([]any) {
			nc := n.(map[string]any)
			if jsonText(t, nc["TopicARN"]) == `{"Ref":"`+topic+`"}` {
				for _, typ := range nc["NotificationTypes"].([]any) {
					errorsTo = append(errorsTo, typ.(string))
				}
			}
		}
		if !slices.Contains(errorsTo, "autoscaling:EC2_INSTANCE_LAUNCH_ERROR") {
			t.Errorf("%s does not send launch errors to the alarm topic: %v", id, g["NotificationConfigurations"])
		}
	}
	if len(cfg.Alarms.Emails) != 0 {
		t.Fatalf("the dev config subscribes %v", cfg.Alarms.Emails)
	}
	synth(t, "dev").tpl.ResourceCountIs(jsii.String("AWS::SNS::Subscription"), jsii.Number(0))

	prod := synth(t, "prod")
	for _, f := range prod.cfg.Fleets {
		prod.tpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), obj(map[string]any{
			"AlarmName": "fleetq-prod-" + f.Slug + "-oldest-queued", "Threshold": f.QueueSLO.Std().Seconds(),
			"MetricName": "OldestQueuedAgeSeconds", "Namespace": "fleetq",
		}))
	}
	for _, f := range prod.cfg.Fleets {
		prod.tpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), obj(map[string]any{
			"AlarmName": "fleetq-prod-" + f.Slug + "-unhealthy-workers", "MetricName": "UnhealthyWorkers", "Namespace": "fleetq",
			"Statistic": "Maximum", "Threshold": 1, "ComparisonOperator": "GreaterThanOrEqualToThreshold",
			"Dimensions": assertions.Match_ArrayWith(&[]any{map[string]any{"Name": "FleetSlug", "Value": f.Slug}}),
		}))
	}
	slos := map[fleetconfig.Duration]string{}
	for _, f := range prod.cfg.Fleets {
		if other, ok := slos[f.QueueSLO]; ok {
			t.Fatalf("the prod fleets %s and %s share a queue_slo: the test could not tell them apart", other, f.Slug)
		}
		slos[f.QueueSLO] = f.Slug
	}
}

// Workers are operable: a log group per fleet with retention that the
// instances write and the user data ships to, Session Manager instead of
// SSH, and volumes tagged like the instances.
func TestWorkersAreOperable(t *testing.T) {
	s := synth(t, "prod")
	var workerGroups []string
	for id, g := range s.resources("AWS::Logs::LogGroup") {
		if strings.Contains(id, "WorkerLogs") {
			workerGroups = append(workerGroups, id)
			if g["RetentionInDays"] != float64(30) {
				t.Errorf("%s keeps logs %v days, want 30 in prod", id, g["RetentionInDays"])
			}
			if _, named := g["LogGroupName"]; named {
				t.Errorf("%s has a fixed name", id)
			}
		}
	}
	if len(workerGroups) != len(s.cfg.Fleets) {
		t.Fatalf("worker log groups %v, want one per fleet", workerGroups)
	}
	writes := s.statements("logs:PutLogEvents")
	for _, lg := range workerGroups {
		found := false
		for _, st := range writes {
			found = found || strings.Contains(jsonText(t, st["Resource"]), `"`+lg+`"`)
		}
		if !found {
			t.Errorf("the workers may not write %s", lg)
		}
		used := 0
		for _, ud := range s.userData(t) {
			if strings.Contains(ud, `"LogGroup":{"Ref":"`+lg+`"}`) {
				used++
			}
		}
		if used != 1 {
			t.Errorf("%s is the log group of %d launch templates, want 1", lg, used)
		}
	}
	for id, ud := range s.userData(t) {
		// A worker that gave up on a sick GPU exits 3 and stays down.
		for _, f := range []string{"/var/log/fleetq/boot.log", "/var/log/fleetq/worker.log", "StandardOutput=append:/var/log/fleetq/worker.log", `\"$cw\" -a fetch-config`, "cw=$root/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl",
			`Restart=on-failure\nRestartSec=5\nRestartPreventExitStatus=3\n`} {
			if !strings.Contains(ud, f) {
				t.Errorf("%s: user data lacks %s", id, f)
			}
		}
	}
	workerRoles := 0
	for _, r := range s.resources("AWS::IAM::Role") {
		if strings.Contains(jsonText(t, r["AssumeRolePolicyDocument"]), "ec2.amazonaws.com") {
			workerRoles++
			if _, ok := r["ManagedPolicyArns"]; ok {
				t.Errorf("a worker role has managed policies (AmazonSSMManagedInstanceCore reads every SSM parameter of the account): %v", r["ManagedPolicyArns"])
			}
		}
	}
	if workerRoles == 0 {
		t.Fatal("no worker role")
	}
	// Session Manager, inline: its actions and no parameter read.
	sm := 0
	for _, st := range s.statements("ssmmessages:OpenDataChannel") {
		if jsonText(t, st["Action"]) == jsonText(t, infra.SessionManagerActions) {
			sm++
		}
	}
	if sm != workerRoles {
		t.Errorf("%d statements allow Session Manager's actions, want one per worker role (%d)", sm, workerRoles)
	}
	// No role may read parameters, job code on a worker least of all; only
	// the scaler reads its launch templates' image parameters, which Auto
	// Scaling checks when it updates a group (TestScalerMayUseTheSpotTemplates).
	scaler := s.roleOf(t, "fleetq-prod-scaler")
	for _, a := range []string{"ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath", "ssm:*", "*"} {
		for _, role := range s.rolesWith(t, a) {
			if a != "ssm:GetParameters" || role != scaler {
				t.Errorf("%s may %s: %v", role, a, s.statements(a))
			}
		}
	}
	for _, sg := range s.resources("AWS::EC2::SecurityGroup") {
		if _, ok := sg["SecurityGroupIngress"]; ok {
			t.Errorf("a security group admits inbound traffic: %v", sg)
		}
	}
	s.tpl.HasResourceProperties(jsii.String("AWS::EC2::LaunchTemplate"), obj(map[string]any{
		"LaunchTemplateData": assertions.Match_ObjectLike(&map[string]any{
			"TagSpecifications": []any{
				map[string]any{"ResourceType": "instance", "Tags": []any{
					map[string]any{"Key": "Name", "Value": "fleetq-prod-regen3d-l4"},
					map[string]any{"Key": infra.TagStage, "Value": "prod"},
					map[string]any{"Key": infra.TagFleet, "Value": "regen3d-l4"},
				}},
				map[string]any{"ResourceType": "volume", "Tags": []any{
					map[string]any{"Key": "Name", "Value": "fleetq-prod-regen3d-l4"},
					map[string]any{"Key": infra.TagStage, "Value": "prod"},
					map[string]any{"Key": infra.TagFleet, "Value": "regen3d-l4"},
				}},
			},
		}),
	}))
}

// Zones come from the config, else from Fn::GetAZs: never made up from the
// region's name.
func TestZones(t *testing.T) {
	prod := synth(t, "prod")
	var zones []string
	for _, sn := range prod.resources("AWS::EC2::Subnet") {
		zones = append(zones, sn["AvailabilityZone"].(string))
	}
	slices.Sort(zones)
	if !slices.Equal(zones, prod.cfg.Network.AvailabilityZones) {
		t.Errorf("prod subnets in %v, want the config's %v", zones, prod.cfg.Network.AvailabilityZones)
	}
	dev := synth(t, "dev")
	subnets := dev.resources("AWS::EC2::Subnet")
	if len(subnets) != 2 {
		t.Errorf("dev has %d subnets, want 2 (max_azs)", len(subnets))
	}
	for id, sn := range subnets {
		if !strings.Contains(jsonText(t, sn["AvailabilityZone"]), `"Fn::GetAZs"`) {
			t.Errorf("dev subnet %s in %v, want a zone of Fn::GetAZs", id, sn["AvailabilityZone"])
		}
	}
}

// agent_url overrides the shipped agent: no asset, no asset read grant,
// and the download is checked against agent_sha256.
func TestAgentURLOverride(t *testing.T) {
	_, raw, err := infra.LoadConfig("dev", "")
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("ab", 32)
	text := strings.Replace(string(raw), "alarms:", "agent_url: https://downloads.example.com/fleetq-v1.2.3-linux-amd64\nagent_sha256: "+sum+"\nalarms:", 1)
	cfg, err := fleetconfig.Parse("override.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	s := synthConfig(t, "dev-agent-url", cfg, []byte(text))
	if len(s.stack.Agents) != 0 {
		t.Errorf("agents %v published though agent_url overrides them", s.stack.Agents)
	}
	for _, st := range s.statements("s3:GetObject") {
		if strings.Contains(jsonText(t, st["Resource"]), "cdk-hnb659fds-assets") {
			t.Errorf("the workers may read the asset bucket: %v", st)
		}
	}
	for id, ud := range s.userData(t) {
		for _, want := range []string{`curl -fsSL --retry 5 -o \"$root/usr/local/bin/fleetq.new\" '${AgentUrl}'`, `"AgentUrl":"https://downloads.example.com/fleetq-v1.2.3-linux-amd64"`, `"AgentSha256":"` + sum + `"`, "sha256sum -c"} {
			if !strings.Contains(ud, want) {
				t.Errorf("%s: user data lacks %s", id, want)
			}
		}
	}
}

// The API's role may get and put tenants' objects, nothing else in S3.
func TestAPIBucketAccessIsGetPutOnTenants(t *testing.T) {
	s := synth(t, "dev")
	for id, p := range s.resources("AWS::IAM::Policy") {
		if !strings.HasPrefix(id, "ApiServiceRole") {
			continue
		}
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			text := jsonText(t, st)
			if !strings.Contains(text, `"s3:`) {
				continue
			}
			if jsonText(t, st.(map[string]any)["Action"]) != `["s3:GetObject","s3:PutObject"]` || !strings.Contains(text, `/tenants/*"`) {
				t.Errorf("API S3 statement %s, want s3:GetObject and s3:PutObject on tenants/*", text)
			}
		}
	}
}
