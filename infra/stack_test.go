package infra_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/infra"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/service/api"
	"github.com/fleetq/fleetq/pkg/service/interruption"
)

// Each stage is synthesized once (a synthesis costs seconds) and its
// template shared by the tests.
var (
	mu        sync.Mutex
	templates = map[string]synthesized{}
)

type synthesized struct {
	tpl   assertions.Template
	stack *infra.Stack
	json  map[string]any
	cfg   *fleetconfig.Config
	// raw is the config's text, deployed with each function.
	raw []byte
	// agentSHA256 are the digests of the agent binaries the test built, by
	// architecture.
	agentSHA256 map[string]string
}

// agentBody is the stand-in agent binary of an architecture: a script
// that names it.
func agentBody(arch string) []byte { return []byte("#!/bin/sh\necho fleetq test agent " + arch + "\n") }

// agentDir writes a stand-in agent binary per architecture, each with its
// own content, and answers the directory and their SHA-256 digests.
func agentDir(t *testing.T) (string, map[string]string) {
	dir, sums := t.TempDir(), map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		body := agentBody(arch)
		if err := os.MkdirAll(filepath.Join(dir, arch), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, arch, infra.AgentBinary), body, 0o755); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(body)
		sums[arch] = hex.EncodeToString(sum[:])
	}
	return dir, sums
}

func synth(t *testing.T, stage string) synthesized {
	t.Helper()
	cfg, raw, err := infra.LoadConfig(stage, "")
	if err != nil {
		t.Fatal(err)
	}
	return synthConfig(t, stage, cfg, raw)
}

// synthConfig synthesizes a config once per key, with the test's agent
// binaries and placeholder functions.
func synthConfig(t *testing.T, key string, cfg *fleetconfig.Config, raw []byte) synthesized {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if s, ok := templates[key]; ok {
		return s
	}
	agents, sums := agentDir(t)
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	st, err := infra.New(app, infra.Options{Config: cfg, ConfigYAML: raw, BinDir: t.TempDir(), AgentDir: agents, AllowPlaceholders: true})
	if err != nil {
		t.Fatal(err)
	}
	tpl := assertions.Template_FromStack(st.Stack, nil)
	var doc map[string]any
	b, _ := json.Marshal(tpl.ToJSON())
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	s := synthesized{tpl: tpl, stack: st, json: doc, cfg: cfg, raw: raw, agentSHA256: sums}
	templates[key] = s
	return s
}

// resources returns the template's resources of a type, by logical id.
func (s synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.json["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			props, _ := res["Properties"].(map[string]any)
			out[id] = props
		}
	}
	return out
}

func obj(m map[string]any) *map[string]any { return &m }

func TestSpotGroupPerFleet(t *testing.T) {
	s := synth(t, "prod")
	s.tpl.ResourceCountIs(jsii.String("AWS::AutoScaling::AutoScalingGroup"), jsii.Number(3))
	s.tpl.HasResourceProperties(jsii.String("AWS::AutoScaling::AutoScalingGroup"), obj(map[string]any{
		"AutoScalingGroupName":             "fleetq-prod-video-a10g",
		"MinSize":                          "0",
		"MaxSize":                          "10",
		"CapacityRebalance":                true,
		"NewInstancesProtectedFromScaleIn": true,
		"MixedInstancesPolicy": map[string]any{
			"InstancesDistribution": map[string]any{
				"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0,
				"SpotAllocationStrategy": "capacity-optimized-prioritized",
			},
			"LaunchTemplate": assertions.Match_ObjectLike(&map[string]any{
				"Overrides": []any{
					map[string]any{"InstanceType": "g5.xlarge"}, map[string]any{"InstanceType": "g5.2xlarge"}, map[string]any{"InstanceType": "g6.xlarge"},
				},
			}),
		},
		"LifecycleHookSpecificationList": []any{map[string]any{
			"LifecycleHookName": infra.LifecycleHook, "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
			"HeartbeatTimeout": 300, "DefaultResult": "CONTINUE",
		}},
		"Tags": assertions.Match_ArrayWith(&[]any{map[string]any{"Key": infra.TagStage, "Value": "prod", "PropagateAtLaunch": true}}),
	}))
	for id, g := range s.resources("AWS::AutoScaling::AutoScalingGroup") {
		// Instances carry Name, stage and fleet (propagated at launch).
		fleet := strings.TrimPrefix(g["AutoScalingGroupName"].(string), "fleetq-prod-")
		tags := map[string]string{}
		for _, tag := range g["Tags"].([]any) {
			tm := tag.(map[string]any)
			if tm["PropagateAtLaunch"] == true {
				tags[tm["Key"].(string)] = tm["Value"].(string)
			}
		}
		if tags["Name"] != "fleetq-prod-"+fleet || tags[infra.TagStage] != "prod" || tags[infra.TagFleet] != fleet {
			t.Errorf("%s: tags propagated to instances %v", id, tags)
		}
		if _, ok := g["DesiredCapacity"]; ok {
			t.Errorf("%s sets DesiredCapacity: a stack update would reset the scaler's", id)
		}
		if subnets := g["VPCZoneIdentifier"].([]any); len(subnets) < 2 {
			t.Errorf("%s spans %d subnets, want several zones", id, len(subnets))
		}
	}
	s.tpl.HasResourceProperties(jsii.String("AWS::EC2::LaunchTemplate"), obj(map[string]any{
		"LaunchTemplateData": assertions.Match_ObjectLike(&map[string]any{
			"ImageId":         "resolve:ssm:/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id",
			"MetadataOptions": assertions.Match_ObjectLike(&map[string]any{"HttpTokens": "required"}),
		}),
	}))
	// The user data starts the agent for the fleet; it attests (no secret).
	for _, lt := range s.resources("AWS::EC2::LaunchTemplate") {
		ud, _ := json.Marshal(lt["LaunchTemplateData"].(map[string]any)["UserData"])
		for _, want := range []string{"fleetq worker", "FLEETQ_STAGE=prod", "FLEETQ_API=${ApiUrl}", "AWS_REGION="} {
			if !strings.Contains(string(ud), want) {
				t.Errorf("user data lacks %q: %s", want, ud)
			}
		}
	}
}

func TestRoutesAuthorization(t *testing.T) {
	s := synth(t, "dev")
	// Routes by API: the IAM API (HttpApi) and the key API (KeyApi).
	auth, keyAuth := map[string]string{}, map[string]string{}
	for _, r := range s.resources("AWS::ApiGatewayV2::Route") {
		at, _ := r["AuthorizationType"].(string)
		apiRef, _ := json.Marshal(r["ApiId"])
		switch {
		case strings.Contains(string(apiRef), `"KeyApi`):
			keyAuth[r["RouteKey"].(string)] = at
		case strings.Contains(string(apiRef), `"HttpApi`):
			auth[r["RouteKey"].(string)] = at
		default:
			t.Errorf("route %v of an unknown API %s", r["RouteKey"], apiRef)
		}
	}
	// The key API serves exactly the producer routes, without an
	// authorizer: the handler checks the API key.
	for _, r := range api.Routes() {
		key := r.Method + " " + r.Pattern
		a, ok := keyAuth[key]
		switch {
		case infra.ProducerRoute(r) && !ok:
			t.Errorf("the key API lacks the producer route %s", key)
		case infra.ProducerRoute(r) && a != "" && a != "NONE":
			t.Errorf("key API %s: authorization %q; the handler checks the key", key, a)
		case !infra.ProducerRoute(r) && ok:
			t.Errorf("the key API serves %s, which is not a producer route", key)
		}
	}
	producer := 0
	for _, r := range api.Routes() {
		if infra.ProducerRoute(r) {
			producer++
		}
	}
	if len(keyAuth) != producer {
		t.Errorf("the key API has %d routes, want the %d producer routes: %v", len(keyAuth), producer, keyAuth)
	}
	if outputs := s.json["Outputs"].(map[string]any); outputs["KeyApiUrl"] == nil {
		t.Error("no KeyApiUrl output")
	}
	// Every route of the API's table is a route of the HTTP API: IAM on
	// operator routes, none on worker routes (the handler checks the fleet
	// secret and tokens).
	for _, r := range api.Routes() {
		key := r.Method + " " + r.Pattern
		a, ok := auth[key]
		switch {
		case !ok:
			t.Errorf("%s is not a route of the HTTP API (routes: %v)", key, auth)
		case infra.IAMRoute(r) && a != "AWS_IAM":
			t.Errorf("%s: authorization %q, want AWS_IAM", key, a)
		case !infra.IAMRoute(r) && a != "" && a != "NONE":
			t.Errorf("%s: authorization %q; the handler checks the fleet secret and tokens", key, a)
		}
	}
	if a, ok := auth["$default"]; !ok || (a != "" && a != "NONE") {
		t.Errorf("$default route: present %v, authorization %q", ok, a)
	}
	if len(auth) != len(api.Routes())+1 {
		t.Errorf("%d routes in the HTTP API, want the %d of the API's table and $default: %v", len(auth), len(api.Routes()), auth)
	}
	s.tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), obj(map[string]any{
		"StageName":            "$default",
		"DefaultRouteSettings": map[string]any{"ThrottlingBurstLimit": 200, "ThrottlingRateLimit": 100},
		"AccessLogSettings":    assertions.Match_ObjectLike(&map[string]any{"DestinationArn": assertions.Match_AnyValue()}),
	}))
}

func TestQueueTableBucketRules(t *testing.T) {
	dev, prod := synth(t, "dev"), synth(t, "prod")
	dev.tpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), obj(map[string]any{
		"QueueName": "fleetq-dev-submit", "SqsManagedSseEnabled": true,
		"RedrivePolicy": assertions.Match_ObjectLike(&map[string]any{"maxReceiveCount": 5}),
	}))
	dev.tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), obj(map[string]any{
		"BatchSize": 10, "FunctionResponseTypes": []any{"ReportBatchItemFailures"},
		"ScalingConfig": map[string]any{"MaximumConcurrency": 10}, "MaximumBatchingWindowInSeconds": 1,
	}))
	for stage, s := range map[string]synthesized{"dev": dev, "prod": prod} {
		s.tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), obj(map[string]any{
			"TableName": "fleetq-" + stage, "BillingMode": "PAY_PER_REQUEST",
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"TimeToLiveSpecification":          map[string]any{"AttributeName": store.AttrTTL, "Enabled": true},
			"DeletionProtectionEnabled":        false,
			"GlobalSecondaryIndexes": []any{
				assertions.Match_ObjectLike(&map[string]any{"IndexName": store.IndexByState,
					"Projection": map[string]any{"ProjectionType": "INCLUDE", "NonKeyAttributes": store.ByStateProjection}}),
				assertions.Match_ObjectLike(&map[string]any{"IndexName": store.IndexByInstance}),
			},
		}))
	}
	dev.tpl.HasResourceProperties(jsii.String("AWS::S3::Bucket"), obj(map[string]any{
		"PublicAccessBlockConfiguration": map[string]any{"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true},
		"BucketEncryption":               assertions.Match_AnyValue(),
		"LifecycleConfiguration":         assertions.Match_AnyValue(),
	}))
	dev.tpl.HasResourceProperties(jsii.String("AWS::S3::BucketPolicy"), obj(map[string]any{
		"PolicyDocument": assertions.Match_ObjectLike(&map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
			assertions.Match_ObjectLike(&map[string]any{"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}}}),
		})}),
	}))
	dev.tpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), obj(map[string]any{"ScheduleExpression": "rate(1 minute)"}))
	var detailTypes []string
	for _, r := range dev.resources("AWS::Events::Rule") {
		if p, ok := r["EventPattern"].(map[string]any); ok {
			for _, d := range p["detail-type"].([]any) {
				detailTypes = append(detailTypes, d.(string))
			}
		}
	}
	slices.Sort(detailTypes)
	// Every detail type the interruption handler takes, from its table.
	var want []string
	for _, h := range interruption.HandledEvents() {
		want = append(want, h.DetailType)
	}
	slices.Sort(want)
	if !slices.Equal(detailTypes, want) {
		t.Errorf("interruption rules route %v, want %v", detailTypes, want)
	}
	// Alarms: three per fleet, the two dead-letter queues, and each function's errors.
	dev.tpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(3*1+2+5))
	prod.tpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(3*3+2+5))
	dev.tpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1))
	for _, o := range []string{"ApiUrl", "SubmitQueueUrl", "TableName", "BucketName"} {
		if _, ok := dev.json["Outputs"].(map[string]any)[o]; !ok {
			t.Errorf("no output %s", o)
		}
	}
}

func TestFunctions(t *testing.T) {
	s := synth(t, "dev")
	fns := map[string]map[string]any{}
	for _, f := range s.resources("AWS::Lambda::Function") {
		if n, ok := f["FunctionName"].(string); ok {
			fns[n] = f
		}
	}
	for _, name := range infra.Functions {
		f, ok := fns["fleetq-dev-"+name]
		if !ok {
			t.Fatalf("no function %s (have %v)", name, fns)
		}
		if f["Runtime"] != "provided.al2023" || f["Architectures"].([]any)[0] != "arm64" || f["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v %v %v", name, f["Runtime"], f["Architectures"], f["Handler"])
		}
		env := f["Environment"].(map[string]any)["Variables"].(map[string]any)
		if env["FLEETQ_STAGE"] != "dev" || env["FLEETQ_CONFIG_FILE"] != "/var/task/"+infra.ConfigFileName || env["FLEETQ_TABLE"] == nil {
			t.Errorf("%s: environment %v", name, env)
		}
		if name == "scaler" || name == "dispatch" {
			if env["FLEETQ_FLEET_GROUPS"] != `{"demo":"fleetq-dev-demo"}` {
				t.Errorf("%s: fleet groups %v", name, env["FLEETQ_FLEET_GROUPS"])
			}
		}
	}
	if len(s.stack.Placeholders) != len(infra.Functions) {
		t.Errorf("placeholders %v: the test synthesizes without binaries", s.stack.Placeholders)
	}
}

// No IAM statement grants "*" where a narrower resource exists: the only
// wildcards are Auto Scaling's Describe* and the scaler's
// ec2:DescribeSpotPriceHistory, which support no resource-level permission.
func TestIAMLeastPrivilege(t *testing.T) {
	spot := map[string]bool{}
	for _, stage := range []string{"dev", "prod", "prod-on-demand", "prod-spot-pool"} {
		var s synthesized
		switch stage {
		case "prod-on-demand":
			s, stage = synthOnDemand(t), "prod"
		case "prod-spot-pool":
			s, stage = synthSpotPool(t), "prod"
		default:
			s = synth(t, stage)
		}
		for id, p := range s.resources("AWS::IAM::Policy") {
			for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				stmt := st.(map[string]any)
				resources := stmt["Resource"]
				if rs, ok := resources.([]any); ok && len(rs) == 1 {
					resources = rs[0]
				}
				if resources != "*" {
					continue
				}
				actions := stmt["Action"]
				if stmt["Sid"] == "SessionManager" && strings.Contains(id, "WorkerRole") {
					continue // Session Manager's actions (infra.SessionManagerActions, tested apart)
				}
				if actions == "ec2:RunInstances" {
					// Only from the stage's own launch templates, by the scaler.
					cond, _ := json.Marshal(stmt["Condition"])
					if !strings.HasPrefix(id, "ScalerServiceRoleDefaultPolicy") || !strings.Contains(string(cond), `"ArnEquals":{"ec2:LaunchTemplate":`) {
						t.Errorf("%s %s: ec2:RunInstances on * not limited to the stage's launch templates: %s", stage, id, cond)
					}
					continue
				}
				if actions == "ec2:DescribeInstances" {
					// A stopped Spot pool's instances, by the roles that run it.
					if !strings.HasPrefix(id, "ScalerServiceRoleDefaultPolicy") && !strings.HasPrefix(id, "DispatchServiceRoleDefaultPolicy") {
						t.Errorf("%s %s: only the scaler and dispatch describe the pool's instances", stage, id)
					}
					continue
				}
				if a, ok := actions.(string); !ok || (a != "autoscaling:DescribeAutoScalingGroups" && a != "autoscaling:DescribeScalingActivities" && a != "ec2:DescribeSpotPriceHistory" && a != "autoscaling:DescribeAutoScalingInstances") {
					t.Errorf("%s %s: %v on *", stage, id, actions)
				}
				if actions == "autoscaling:DescribeAutoScalingInstances" && !strings.HasPrefix(id, "ApiServiceRoleDefaultPolicy") {
					t.Errorf("%s %s: only the API finds an instance's group", stage, id)
				}
				if actions == "ec2:DescribeSpotPriceHistory" && !strings.HasPrefix(id, "ScalerServiceRoleDefaultPolicy") {
					t.Errorf("%s %s: only the scaler reads Spot prices", stage, id)
				}
				if actions == "ec2:DescribeSpotPriceHistory" {
					spot[stage] = true
				}
			}
		}
		// Auto Scaling writes are scoped to the stage's tagged groups.
		for id, p := range s.resources("AWS::IAM::Policy") {
			b, _ := json.Marshal(p)
			if strings.Contains(string(b), "autoscaling:SetDesiredCapacity") && !strings.Contains(string(b), `"aws:ResourceTag/fleetq:stage":"`+stage+`"`) {
				t.Errorf("%s %s: Auto Scaling writes not scoped by the stage tag: %s", stage, id, b)
			}
		}
		if !spot[stage] {
			t.Errorf("%s: the scaler may not read Spot prices (ec2:DescribeSpotPriceHistory)", stage)
		}
	}
}

func TestBadConfigFailsSynthesisWithItsMessage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "prod.yaml")
	if err := os.WriteFile(bad, []byte("stage: prod\nfleets:\n  - slug: x\n    workflows: [a]\n    instance_types: [g5.xlarge]\n    max_instances: -1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := infra.LoadConfig("prod", bad)
	if err == nil || !strings.Contains(err.Error(), "prod.yaml") || !strings.Contains(err.Error(), "max_instances") {
		t.Fatalf("err = %v, want the config's validation message", err)
	}
	if _, _, err := infra.LoadConfig("nope", ""); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown stage: %v", err)
	}
}

// The wait route goes, on both APIs, to a function of its own whose
// reserved concurrency (wait_concurrency) caps the waits held at once;
// every other route goes to the API function. The wait function may use
// the table and nothing else.
func TestWaitRouteHasItsOwnCappedFunction(t *testing.T) {
	s := synth(t, "dev")
	// Each integration's function, by the integration's logical id.
	target := map[string]string{}
	for id, in := range s.resources("AWS::ApiGatewayV2::Integration") {
		uri, _ := json.Marshal(in["IntegrationUri"])
		switch {
		case strings.Contains(string(uri), `"Wait`):
			target[id] = "wait"
		case strings.Contains(string(uri), `"Api`):
			target[id] = "api"
		}
	}
	waits := 0
	for _, r := range s.resources("AWS::ApiGatewayV2::Route") {
		key := r["RouteKey"].(string)
		ref, _ := json.Marshal(r["Target"])
		fn := ""
		for id, f := range target {
			if strings.Contains(string(ref), `"`+id+`"`) {
				fn = f
			}
		}
		want := "api"
		if key == "GET "+wire.PathJobWait {
			want = "wait"
			waits++
		}
		if fn != want && key != "$default" {
			t.Errorf("route %s goes to the %q function, want %s (target %s)", key, fn, want, ref)
		}
	}
	if waits != 2 {
		t.Errorf("the wait route is on %d APIs, want both", waits)
	}
	found := false
	for id, f := range s.resources("AWS::Lambda::Function") {
		if f["FunctionName"] != "fleetq-dev-wait" {
			continue
		}
		found = true
		if got, want := f["ReservedConcurrentExecutions"], float64(s.cfg.WaitConcurrency); got != want || want != float64(fleetconfig.DefaultWaitConcurrency) {
			t.Errorf("%s: reserved concurrency %v, want wait_concurrency %v", id, got, want)
		}
	}
	if !found {
		t.Fatal("no wait function")
	}
	for id, p := range s.resources("AWS::IAM::Policy") {
		if !strings.HasPrefix(id, "WaitServiceRoleDefaultPolicy") {
			continue
		}
		b, _ := json.Marshal(p["PolicyDocument"])
		for _, other := range []string{"sqs:", "s3:", "secretsmanager:", "events:", "autoscaling:"} {
			if strings.Contains(string(b), `"`+other) {
				t.Errorf("%s: the wait function may use %s* (%s)", id, other, b)
			}
		}
	}
}
