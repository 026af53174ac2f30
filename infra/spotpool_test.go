package infra_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/infra"
)

// synthSpotPool is the prod stage with a stopped Spot pool on video-a10g.
func synthSpotPool(t *testing.T) synthesized {
	t.Helper()
	_, raw, err := infra.LoadConfig("prod", "")
	if err != nil {
		t.Fatal(err)
	}
	pool := "    spot_pool:\n      size: 4\n      pairs:\n" +
		"        - {instance_type: g5.xlarge, zone: us-east-1a}\n        - {instance_type: g5.xlarge, zone: us-east-1b}\n" +
		"        - {instance_type: g6.xlarge, zone: us-east-1a}\n"
	text := strings.Replace(string(raw), "  - slug: video-a10g\n", "  - slug: video-a10g\n"+pool, 1)
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
	return synthConfig(t, "prod-spot-pool", cfg, raw)
}

// statements answers each role policy's statements that name action.
func statements(s synthesized, action string) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for id, p := range s.resources("AWS::IAM::Policy") {
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			stmt := st.(map[string]any)
			actions, ok := stmt["Action"].([]any)
			if !ok {
				actions = []any{stmt["Action"]}
			}
			if slices.Contains(actions, any(action)) {
				out[id] = append(out[id], stmt)
			}
		}
	}
	return out
}

// With a Spot pool, the scaler may start, stop and terminate instances and
// cancel Spot requests tagged with the stage and the pool, and tag a pool
// launch's Spot request; dispatch may only start them; without a pool,
// no role may do any of it.
func TestSpotPoolPermissions(t *testing.T) {
	s := synthSpotPool(t)
	poolCondition := `{"StringEquals":{"aws:ResourceTag/fleetq:pool":"spot","aws:ResourceTag/fleetq:stage":"prod"}}`
	for _, c := range []struct {
		action string
		roles  []string
	}{
		{"ec2:StartInstances", []string{"Scaler", "Dispatch"}},
		{"ec2:StopInstances", []string{"Scaler"}},
		{"ec2:TerminateInstances", []string{"Scaler"}},
		{"ec2:CancelSpotInstanceRequests", []string{"Scaler"}},
	} {
		got := statements(s, c.action)
		var roles []string
		for id, stmts := range got {
			role, _, _ := strings.Cut(id, "ServiceRole")
			roles = append(roles, role)
			for _, stmt := range stmts {
				cond, _ := json.Marshal(stmt["Condition"])
				res, _ := json.Marshal(stmt["Resource"])
				if string(cond) != poolCondition || strings.Contains(string(res), `"*"`) {
					t.Errorf("%s in %s: on %s when %s", c.action, id, res, cond)
				}
			}
		}
		slices.Sort(roles)
		want := slices.Sorted(slices.Values(c.roles))
		if !slices.Equal(roles, want) {
			t.Errorf("%s granted to %v, want %v", c.action, roles, want)
		}
	}
	tagged := false
	for id, stmts := range statements(s, "ec2:CreateTags") {
		for _, stmt := range stmts {
			b, _ := json.Marshal(stmt)
			if strings.Contains(string(b), "spot-instances-request/*") {
				tagged = strings.HasPrefix(id, "ScalerServiceRole") && strings.Contains(string(b), `"ec2:CreateAction":"RunInstances"`)
			}
		}
	}
	if !tagged {
		t.Error("the scaler may not tag a pool launch's Spot request at launch")
	}
	plain := synth(t, "prod")
	for _, action := range []string{"ec2:StartInstances", "ec2:StopInstances", "ec2:TerminateInstances", "ec2:CancelSpotInstanceRequests", "ec2:DescribeInstances"} {
		if got := statements(plain, action); len(got) > 0 {
			t.Errorf("without a Spot pool, %s is granted: %v", action, got)
		}
	}
}
