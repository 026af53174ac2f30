package infra_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// The interruption function has its own one-minute schedule (the sweep of
// held terminations) and may heartbeat only the stage's tagged groups.
func TestInterruptionSweepScheduleAndHeartbeat(t *testing.T) {
	s := synth(t, "dev")
	fnID, role := "", ""
	for id, f := range s.resources("AWS::Lambda::Function") {
		if f["FunctionName"] == "fleetq-dev-interruption" {
			fnID = id
			b, _ := json.Marshal(f["Role"]) // {"Fn::GetAtt":[<role>,"Arn"]}
			role = string(b)
		}
	}
	if fnID == "" {
		t.Fatal("no interruption function")
	}
	swept := false
	for _, r := range s.resources("AWS::Events::Rule") {
		if r["ScheduleExpression"] != "rate(1 minute)" {
			continue
		}
		b, _ := json.Marshal(r["Targets"])
		swept = swept || strings.Contains(string(b), `"`+fnID+`"`)
	}
	if !swept {
		t.Error("no one-minute schedule targets the interruption function")
	}
	granted := false
	for _, p := range s.resources("AWS::IAM::Policy") {
		b, _ := json.Marshal(p)
		if !strings.Contains(string(b), "autoscaling:RecordLifecycleActionHeartbeat") {
			continue
		}
		granted = true
		if role == "" || !strings.Contains(string(b), strings.TrimSuffix(strings.TrimPrefix(role, `{"Fn::GetAtt":[`), `,"Arn"]}`)) || !strings.Contains(string(b), `"aws:ResourceTag/fleetq:stage":"dev"`) {
			t.Errorf("heartbeat grant not the interruption function's, scoped by the stage tag: %s", b)
		}
	}
	if !granted {
		t.Error("the interruption function may not heartbeat lifecycle actions")
	}
}
