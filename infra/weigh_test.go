package infra_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// The scaler may reorder and narrow the stage's Spot groups
// (UpdateAutoScalingGroup, scoped like its other Auto Scaling writes) and
// is told the groups' subnets with their zones (FLEETQ_SUBNETS).
func TestScalerMayWeighSpotGroups(t *testing.T) {
	for _, stage := range []string{"dev", "prod"} {
		s := synth(t, stage)
		stmts := s.statements("autoscaling:UpdateAutoScalingGroup")
		if len(stmts) != 1 {
			t.Fatalf("%s: %d statements allow UpdateAutoScalingGroup, want 1", stage, len(stmts))
		}
		b, _ := json.Marshal(stmts[0])
		if !strings.Contains(string(b), `"aws:ResourceTag/fleetq:stage":"`+stage+`"`) || !strings.Contains(string(b), "autoScalingGroupName/fleetq-"+stage+"-*") {
			t.Errorf("%s: UpdateAutoScalingGroup not scoped to the stage's tagged groups: %s", stage, b)
		}
		// Auto Scaling checks the updater may launch from the group's
		// template: RunInstances from the stage's templates, with the
		// template's own image only, PassRole of the workers' role to EC2
		// only.
		run := s.statements("ec2:RunInstances")
		pass := s.statements("iam:PassRole")
		if len(run) != 2 || len(pass) != 1 {
			t.Fatalf("%s: %d RunInstances and %d PassRole statements, want 2 and 1", stage, len(run), len(pass))
		}
		for _, st := range run {
			rb, _ := json.Marshal(st)
			if !strings.Contains(string(rb), `"ec2:LaunchTemplate"`) || !strings.Contains(string(rb), "launch-template/") {
				t.Errorf("%s: RunInstances not limited to the launch templates: %s", stage, rb)
			}
			image := strings.Contains(jsonText(t, st["Resource"]), ":image/*")
			notImage := strings.Contains(jsonText(t, st["NotResource"]), ":image/*")
			if image == notImage {
				t.Errorf("%s: a RunInstances statement neither only for images nor for everything but images: %s", stage, rb)
			}
			if image && !strings.Contains(string(rb), `"Bool":{"ec2:IsLaunchTemplateResource":"true"}`) {
				t.Errorf("%s: RunInstances may use an image other than the template's: %s", stage, rb)
			}
		}
		pb, _ := json.Marshal(pass[0])
		if !strings.Contains(string(pb), `"iam:PassedToService":"ec2.amazonaws.com"`) || !strings.Contains(string(pb), "WorkerRole") {
			t.Errorf("%s: PassRole not limited to the workers' role passed to EC2: %s", stage, pb)
		}
		var env map[string]any
		for _, f := range s.resources("AWS::Lambda::Function") {
			if f["FunctionName"] == "fleetq-"+stage+"-scaler" {
				env = f["Environment"].(map[string]any)["Variables"].(map[string]any)
			}
		}
		raw, _ := json.Marshal(env["FLEETQ_SUBNETS"])
		// Deploy-time values: the subnets' Refs and their zones (names from
		// the config in prod, Fn::GetAZs in dev) joined into the JSON.
		if !strings.Contains(string(raw), "Fn::Join") || !strings.Contains(string(raw), `\"subnet\":`) || !strings.Contains(string(raw), `\"zone\":`) {
			t.Fatalf("%s: FLEETQ_SUBNETS = %s", stage, raw)
		}
		if stage == "prod" {
			for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
				if !strings.Contains(string(raw), z) {
					t.Errorf("prod: FLEETQ_SUBNETS lacks %s: %s", z, raw)
				}
			}
		}
	}
}
