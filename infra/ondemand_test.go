package infra_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/infra"
)

// synthOnDemand synthesizes the prod config with an On-Demand rung on its
// fleet video-a10g, from config text as an operator writes it.
func synthOnDemand(t *testing.T) synthesized {
	t.Helper()
	return synthOnDemandWith(t, "prod-on-demand", "")
}

// synthOnDemandWith adds more of on_demand (indented under it) to the rung.
func synthOnDemandWith(t *testing.T, name, more string) synthesized {
	t.Helper()
	_, raw, err := infra.LoadConfig("prod", "")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(raw), "  - slug: video-a10g\n", "  - slug: video-a10g\n    tags: {project: video}\n    on_demand:\n      fallback_after: 10m\n      price_per_hour: 1.006\n"+more, 1)
	if text == string(raw) {
		t.Fatal("the prod config has no fleet video-a10g")
	}
	file := filepath.Join(t.TempDir(), "prod.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, raw, err := infra.LoadConfig("prod", file)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := cfg.Fleet("video-a10g"); !ok || !f.OnDemand.Enabled() {
		t.Fatal("fleet video-a10g has no On-Demand rung")
	}
	return synthConfig(t, name, cfg, raw)
}

// A fleet with on_demand gets a second group: On-Demand only, the same
// launch template, instance types and subnets, minimum 0, the Spot group's
// terminate hook, tagged fleetq:rung=on-demand; the scaler learns its name
// and may read the Spot group's activities; the terminate-hook rule
// covers it. The other fleet keeps one group.
func TestOnDemandGroupForAFleetWithTheRung(t *testing.T) {
	s := synthOnDemand(t)
	s.tpl.ResourceCountIs(jsii.String("AWS::AutoScaling::AutoScalingGroup"), jsii.Number(len(s.cfg.Fleets)+1))
	groups := map[string]map[string]any{}
	for _, g := range s.resources("AWS::AutoScaling::AutoScalingGroup") {
		groups[g["AutoScalingGroupName"].(string)] = g
	}
	od, spot := groups["fleetq-prod-video-a10g-on-demand"], groups["fleetq-prod-video-a10g"]
	if od == nil || spot == nil || groups["fleetq-prod-regen3d-l4-on-demand"] != nil {
		t.Fatalf("groups %v", func() []string {
			var n []string
			for k := range groups {
				n = append(n, k)
			}
			return n
		}())
	}
	s.tpl.HasResourceProperties(jsii.String("AWS::AutoScaling::AutoScalingGroup"), obj(map[string]any{
		"AutoScalingGroupName":             "fleetq-prod-video-a10g-on-demand",
		"MinSize":                          "0",
		"MaxSize":                          "10",
		"NewInstancesProtectedFromScaleIn": true,
		"MixedInstancesPolicy": map[string]any{
			"InstancesDistribution": map[string]any{
				"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 100, "OnDemandAllocationStrategy": "prioritized",
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
		"Tags": assertions.Match_ArrayWith(&[]any{
			map[string]any{"Key": infra.TagFleet, "Value": "video-a10g", "PropagateAtLaunch": true},
			map[string]any{"Key": infra.TagRung, "Value": "on-demand", "PropagateAtLaunch": true},
		}),
	}))
	if _, ok := od["DesiredCapacity"]; ok {
		t.Error("the On-Demand group sets DesiredCapacity: a stack update would reset the scaler's")
	}
	same := func(key string) {
		a, _ := json.Marshal(od[key])
		b, _ := json.Marshal(spot[key])
		if string(a) != string(b) {
			t.Errorf("%s: On-Demand %s, Spot %s", key, a, b)
		}
	}
	same("VPCZoneIdentifier")
	same("NotificationConfigurations")
	// Both groups carry the stage's, the fleet's and the config's
	// cost-allocation tags; only Name and the rung differ.
	tags := func(g map[string]any) string {
		var kept []any
		for _, t := range g["Tags"].([]any) {
			if k := t.(map[string]any)["Key"]; k != "Name" && k != infra.TagRung {
				kept = append(kept, t)
			}
		}
		b, _ := json.Marshal(kept)
		return string(b)
	}
	if a, b := tags(od), tags(spot); a != b || !strings.Contains(a, `"project"`) {
		t.Errorf("tags: On-Demand %s, Spot %s (want the same, with project)", a, b)
	}
	for _, g := range []map[string]any{od, spot} {
		lt, _ := json.Marshal(g["MixedInstancesPolicy"].(map[string]any)["LaunchTemplate"].(map[string]any)["LaunchTemplateSpecification"])
		if !strings.Contains(string(lt), "VideoA10gTemplate") {
			t.Errorf("%s launches from %s, want the fleet's template", g["AutoScalingGroupName"], lt)
		}
	}

	var scalerEnv map[string]any
	for _, f := range s.resources("AWS::Lambda::Function") {
		if f["FunctionName"] == "fleetq-prod-scaler" {
			scalerEnv = f["Environment"].(map[string]any)["Variables"].(map[string]any)
		}
	}
	if scalerEnv["FLEETQ_FLEET_ON_DEMAND_GROUPS"] != `{"video-a10g":"fleetq-prod-video-a10g-on-demand"}` {
		t.Errorf("scaler environment %v", scalerEnv)
	}
	var activities, hookRule bool
	for _, p := range s.resources("AWS::IAM::Policy") {
		b, _ := json.Marshal(p)
		if strings.Contains(string(b), "autoscaling:DescribeScalingActivities") {
			activities = true
		}
	}
	for _, r := range s.resources("AWS::Events::Rule") {
		b, _ := json.Marshal(r["EventPattern"])
		if strings.Contains(string(b), "fleetq-prod-video-a10g-on-demand") {
			hookRule = true
		}
	}
	if !activities || !hookRule {
		t.Errorf("scaler may read activities: %v; terminate-hook rule covers the On-Demand group: %v", activities, hookRule)
	}
}

// Without on_demand nothing of the rung is deployed.
func TestNoOnDemandGroupWithoutTheRung(t *testing.T) {
	s := synth(t, "prod")
	for _, g := range s.resources("AWS::AutoScaling::AutoScalingGroup") {
		if strings.HasSuffix(g["AutoScalingGroupName"].(string), "-on-demand") {
			t.Errorf("On-Demand group %v without on_demand", g["AutoScalingGroupName"])
		}
	}
	policies, _ := json.Marshal(s.resources("AWS::IAM::Policy"))
	functions, _ := json.Marshal(s.resources("AWS::Lambda::Function"))
	if strings.Contains(string(policies), "DescribeScalingActivities") || strings.Contains(string(functions), "FLEETQ_FLEET_ON_DEMAND_GROUPS") {
		t.Error("the rung's grant or environment deployed without on_demand")
	}
}

// on_demand.warm_pool puts an EC2 Auto Scaling warm pool of stopped (or
// hibernated) instances on the On-Demand group, holding exactly its size.
// A warm pool may not sit on a mixed-instances group, so that group
// launches the fleet's first instance type from a template of its own; the
// Spot group keeps its mixed instances policy and no pool.
func TestOnDemandWarmPool(t *testing.T) {
	s := synthOnDemandWith(t, "prod-warm-pool-hibernated", "      warm_pool:\n        size: 2\n        state: hibernated\n")
	s.tpl.ResourceCountIs(jsii.String("AWS::AutoScaling::WarmPool"), jsii.Number(1))
	s.tpl.HasResourceProperties(jsii.String("AWS::AutoScaling::WarmPool"), obj(map[string]any{
		"MinSize": 2, "MaxGroupPreparedCapacity": 2, "PoolState": "Hibernated",
		"InstanceReusePolicy": map[string]any{"ReuseOnScaleIn": false},
	}))
	var pool []byte
	for _, p := range s.resources("AWS::AutoScaling::WarmPool") {
		pool, _ = json.Marshal(p["AutoScalingGroupName"])
	}
	if !strings.Contains(string(pool), "VideoA10gOnDemandGroup") {
		t.Errorf("the warm pool is on %s, want the On-Demand group", pool)
	}
	for _, g := range s.resources("AWS::AutoScaling::AutoScalingGroup") {
		_, mixed := g["MixedInstancesPolicy"]
		switch g["AutoScalingGroupName"] {
		case "fleetq-prod-video-a10g-on-demand":
			lt, _ := json.Marshal(g["LaunchTemplate"])
			if mixed || !strings.Contains(string(lt), "VideoA10gOnDemandTemplate") {
				t.Errorf("the pooled group: mixed instances %v, launch template %s", mixed, lt)
			}
		default:
			if !mixed {
				t.Errorf("%s lost its mixed instances policy", g["AutoScalingGroupName"])
			}
		}
	}
	s.tpl.HasResourceProperties(jsii.String("AWS::EC2::LaunchTemplate"), obj(map[string]any{
		"LaunchTemplateData": assertions.Match_ObjectLike(&map[string]any{
			"InstanceType": "g5.xlarge", "HibernationOptions": map[string]any{"Configured": true},
		}),
	}))
	if n := len(synthOnDemand(t).resources("AWS::AutoScaling::WarmPool")); n != 0 {
		t.Errorf("%d warm pools without on_demand.warm_pool", n)
	}
}

// A fleet with a bridge and no On-Demand rung gets an On-Demand group for
// the bridge alone, with a warm pool that holds the pool's size less the
// bridges running and takes scaled-in instances back (ReuseOnScaleIn); the
// scaler may set instance protection, and dispatch knows the group.
func TestBridgeWarmPool(t *testing.T) {
	_, raw, err := infra.LoadConfig("prod", "")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(raw), "  - slug: video-a10g\n", "  - slug: video-a10g\n    bridge:\n      pool: 3\n", 1)
	// A bridged fleet warms its runners before they register.
	text = strings.Replace(text, "      drain_timeout: 90s\n", "      drain_timeout: 90s\n      warmup:\n        workflow: /opt/fleetq/warmup.json\n", 1)
	file := filepath.Join(t.TempDir(), "prod.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, raw2, err := infra.LoadConfig("prod", file)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := cfg.Fleet("video-a10g"); !ok || f.OnDemand.Enabled() || !f.Bridge.Enabled() {
		t.Fatal("fleet video-a10g: want a bridge and no rung")
	}
	s := synthConfig(t, "prod-bridge-warmup", cfg, raw2)
	s.tpl.ResourceCountIs(jsii.String("AWS::AutoScaling::WarmPool"), jsii.Number(1))
	s.tpl.HasResourceProperties(jsii.String("AWS::AutoScaling::WarmPool"), obj(map[string]any{
		"MinSize": 0, "MaxGroupPreparedCapacity": 3, "PoolState": "Stopped",
		"InstanceReusePolicy": map[string]any{"ReuseOnScaleIn": true},
	}))
	found := false
	for _, g := range s.resources("AWS::AutoScaling::AutoScalingGroup") {
		found = found || g["AutoScalingGroupName"] == "fleetq-prod-video-a10g-on-demand"
	}
	if !found {
		t.Fatal("no On-Demand group for the bridge")
	}
	policies, _ := json.Marshal(s.resources("AWS::IAM::Policy"))
	if !strings.Contains(string(policies), "autoscaling:SetInstanceProtection") || strings.Contains(string(policies), "DescribeScalingActivities") {
		t.Error("want the grant to set instance protection, and no rung's grant to read activities")
	}
	dispatchEnv := false
	for _, fn := range s.resources("AWS::Lambda::Function") {
		b, _ := json.Marshal(fn)
		if strings.Contains(string(b), "dispatch") && strings.Contains(string(b), "FLEETQ_FLEET_ON_DEMAND_GROUPS") {
			dispatchEnv = true
		}
	}
	if !dispatchEnv {
		t.Error("the dispatch function does not know the On-Demand group its wake starts bridges on")
	}
	warmed := 0
	for _, ud := range s.userData(t) {
		if strings.Contains(ud, `Environment=\"FLEETQ_WARMUP_WORKFLOW=/opt/fleetq/warmup.json\"\nEnvironment=\"FLEETQ_WARMUP_TIMEOUT=5m0s\"`) {
			warmed++
		}
	}
	if warmed != 2 {
		t.Errorf("%d launch templates run the warm-up workflow, want the bridged fleet's two (Spot and On-Demand)", warmed)
	}
}
