package infra_test

import (
	"encoding/json"
	"slices"
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

// rolesWith lists the roles (by logical id) whose policies allow action.
func (s synthesized) rolesWith(t *testing.T, action string) []string {
	t.Helper()
	var out []string
	for _, p := range s.resources("AWS::IAM::Policy") {
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			if !strings.Contains(jsonText(t, st.(map[string]any)["Action"]), `"`+action+`"`) {
				continue
			}
			for _, r := range p["Roles"].([]any) {
				if id := r.(map[string]any)["Ref"].(string); !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
		}
	}
	return out
}

// Auto Scaling checks that whoever updates a group may use its launch
// template, and the templates take their image from an SSM parameter
// (resolve:ssm:): the scaler may read exactly those parameters
// (ssm:GetParameters; "Use AWS Systems Manager parameters instead of AMI
// IDs in launch templates", Auto Scaling user guide) — a public one of
// AWS's by its account-less ARN, the stage's own in the stack's account,
// none for a fleet with an ami_id — and tag only the instances and
// volumes a launch creates, with the stage's tag (the templates tag both at
// launch: ec2:CreateTags).
func TestScalerMayUseTheSpotTemplates(t *testing.T) {
	// The smoke fleet keeps the stock image; the video fleet reads the
	// stage's own parameter and the regen3d fleet names its image.
	own := fromProd("prod-own-image", func(s string) string {
		public := "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id"
		head, tail, ok := strings.Cut(s, videoFleet)
		if !ok {
			t.Fatal("the prod config has no fleet video-a10g")
		}
		tail = strings.Replace(tail, "ami_ssm_parameter: "+public, "ami_ssm_parameter: /fleetq/prod/comfyui-ami", 1)
		return head + videoFleet + strings.Replace(tail, "ami_ssm_parameter: "+public, "ami_id: ami-0123456789abcdef0", 1)
	})
	public := `::parameter/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-amazon-linux-2023/latest/ami-id"`
	for _, c := range []struct {
		name       string
		s          synthesized
		parameters []string
	}{
		{"prod", synth(t, "prod"), []string{public}},
		{"prod-own-image", own.synth(t), []string{public, `:",{"Ref":"AWS::AccountId"},":parameter/fleetq/prod/comfyui-ami"`}},
	} {
		scaler := c.s.roleOf(t, "fleetq-prod-scaler")
		get := c.s.statements("ssm:GetParameters")
		if len(get) != 1 || !slices.Equal(c.s.rolesWith(t, "ssm:GetParameters"), []string{scaler}) {
			t.Fatalf("%s: %d statements allow ssm:GetParameters, to %v; want 1, to the scaler", c.name, len(get), c.s.rolesWith(t, "ssm:GetParameters"))
		}
		res := jsonText(t, get[0]["Resource"])
		for _, p := range c.parameters {
			if !strings.Contains(res, p) {
				t.Errorf("%s: ssm:GetParameters on %s, want the templates' parameter %s", c.name, res, p)
			}
		}
		if strings.Contains(res, "*") || strings.Count(res, ":parameter/") != len(c.parameters) {
			t.Errorf("%s: ssm:GetParameters on %s, want exactly the templates' parameters %v", c.name, res, c.parameters)
		}
		tag := c.s.statements("ec2:CreateTags")
		if len(tag) != 1 || !slices.Equal(c.s.rolesWith(t, "ec2:CreateTags"), []string{scaler}) {
			t.Fatalf("%s: %d statements allow ec2:CreateTags, to %v; want 1, to the scaler", c.name, len(tag), c.s.rolesWith(t, "ec2:CreateTags"))
		}
		tb := jsonText(t, tag[0])
		if !strings.Contains(tb, `"ec2:CreateAction":"RunInstances"`) || !strings.Contains(tb, `"aws:RequestTag/fleetq:stage":"prod"`) ||
			!strings.Contains(tb, ":instance/*") || !strings.Contains(tb, ":volume/*") || strings.Count(tb, ":ec2:") != 2 {
			t.Errorf("%s: ec2:CreateTags not limited to the instances and volumes a launch tags with the stage: %s", c.name, tb)
		}
	}
}
