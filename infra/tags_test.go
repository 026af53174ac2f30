package infra_test

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetq/fleetq/infra"
)

func TestCostAllocationTags(t *testing.T) {
	cfg, raw, err := infra.LoadConfig("prod", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tags = map[string]string{"team": "ml", "cost-center": "42"}
	cfg.Fleets[0].Tags = map[string]string{"cost-center": "7", "project": "video"}
	s := synthConfig(t, "tags", cfg, raw)
	f0, f1 := cfg.Fleets[0].Slug, cfg.Fleets[1].Slug

	launch := func(fleet string, user ...map[string]any) []any {
		tags := []any{
			map[string]any{"Key": "Name", "Value": infra.GroupName("prod", fleet)},
			map[string]any{"Key": infra.TagStage, "Value": "prod"},
			map[string]any{"Key": infra.TagFleet, "Value": fleet},
		}
		for _, u := range user {
			tags = append(tags, u)
		}
		return []any{
			map[string]any{"ResourceType": "instance", "Tags": tags},
			map[string]any{"ResourceType": "volume", "Tags": tags},
		}
	}
	// The first fleet's value for cost-center wins over the stage's.
	s.tpl.HasResourceProperties(jsii.String("AWS::EC2::LaunchTemplate"), obj(map[string]any{
		"LaunchTemplateData": assertions.Match_ObjectLike(&map[string]any{"TagSpecifications": launch(f0,
			map[string]any{"Key": "cost-center", "Value": "7"}, map[string]any{"Key": "project", "Value": "video"},
			map[string]any{"Key": "team", "Value": "ml"})}),
	}))
	s.tpl.HasResourceProperties(jsii.String("AWS::EC2::LaunchTemplate"), obj(map[string]any{
		"LaunchTemplateData": assertions.Match_ObjectLike(&map[string]any{"TagSpecifications": launch(f1,
			map[string]any{"Key": "cost-center", "Value": "42"}, map[string]any{"Key": "team", "Value": "ml"})}),
	}))

	// The groups carry them to their instances, the fleet's value winning.
	groups := map[string]map[string]any{}
	for _, g := range s.resources("AWS::AutoScaling::AutoScalingGroup") {
		tags := map[string]any{}
		for _, tg := range g["Tags"].([]any) {
			tg := tg.(map[string]any)
			if tg["PropagateAtLaunch"] != true {
				t.Errorf("group %v: tag %v is not propagated to the instances", g["AutoScalingGroupName"], tg)
			}
			tags[tg["Key"].(string)] = tg["Value"]
		}
		groups[g["AutoScalingGroupName"].(string)] = tags
	}
	for fleet, want := range map[string]map[string]string{
		f0: {"cost-center": "7", "project": "video", "team": "ml"},
		f1: {"cost-center": "42", "team": "ml"},
	} {
		got := groups[infra.GroupName("prod", fleet)]
		for k, v := range want {
			if got[k] != v {
				t.Errorf("group of %s: tag %s = %v, want %s (tags %v)", fleet, k, got[k], v, got)
			}
		}
		if fleet == f1 && got["project"] != nil {
			t.Errorf("group of %s carries the other fleet's tag project", fleet)
		}
	}

	// The stage's tags are on the stack and its other resources.
	s.tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), obj(map[string]any{
		"Tags": assertions.Match_ArrayWith(&[]any{map[string]any{"Key": "cost-center", "Value": "42"}, map[string]any{"Key": "team", "Value": "ml"}}),
	}))
	stackTags := map[string]string{}
	for k, v := range *s.stack.Stack.Tags().TagValues() {
		stackTags[k] = *v
	}
	if stackTags["team"] != "ml" || stackTags["cost-center"] != "42" {
		t.Errorf("stack tags %v lack the stage's", stackTags)
	}
}
