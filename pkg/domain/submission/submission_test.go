package submission

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
)

func TestParse(t *testing.T) {
	cfg := fleetconfig.Default()
	good := `{"job_id":"scene-42:gen-1","tenant_id":"t1","workflow_id":"demo-sleep","priority":5,"input":{"seconds":3},"max_attempts":2,"timeout_seconds":600}`
	s, err := Parse([]byte(good), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.JobID != "scene-42:gen-1" || s.Priority != 5 || string(s.Input) != `{"seconds":3}` || s.MaxAttempts != 2 {
		t.Fatalf("parsed %+v", s)
	}
	n := s.Spec()
	if n.ID != "t1:scene-42:gen-1" || n.TimeoutSeconds != 600 {
		t.Fatalf("Spec = %+v", n)
	}
	if m, err := Parse([]byte(`{"tenant_id":"t","workflow_id":"demo-sleep"}`), cfg); err != nil || string(m.Spec().Input) != `{}` {
		t.Fatalf("minimal submission = %+v, %v", m, err)
	}
}

func TestParseRejects(t *testing.T) {
	cfg := fleetconfig.Default()
	cases := map[string]string{
		`{"workflow_id":"demo-sleep"}`:                                      `"tenant_id" is required`,
		`{"tenant_id":"t"}`:                                                 `"workflow_id" is required`,
		`{"tenant_id":"t","workflow_id":"nope"}`:                            `serves workflow "nope"`,
		`{"tenant_id":"t","workflow_id":"demo-sleep","priority":5000}`:      `"priority": must be between -1000 and 1000`,
		`{"tenant_id":"t","workflow_id":"demo-sleep","input":[1]}`:          `"input": must be a JSON object`,
		`{"tenant_id":"t","workflow_id":"demo-sleep","max_attempts":99}`:    `"max_attempts": must be between 1 and 20`,
		`{"tenant_id":"t","workflow_id":"demo-sleep","timeout_seconds":-1}`: `"timeout_seconds"`,
		`{"tenant_id":"t","workflow_id":"demo-sleep","job_id":"a b"}`:       `"job_id"`,
		`{"tenant_id":"../x","workflow_id":"demo-sleep"}`:                   `"tenant_id"`,
		`{"tenant_id":"ACME","workflow_id":"demo-sleep"}`:                   `"tenant_id": "ACME" is not a tenant id`,
		`{"tenant_id":"acme.","workflow_id":"demo-sleep"}`:                  `"tenant_id": "acme." is not a tenant id`,
		`{"tenant_id":"acmé","workflow_id":"demo-sleep"}`:                   `is not a tenant id`,
		`{"tenant_id":"t","workflow_id":"demo-sleep","colour":1}`:           `unknown field "colour"`,
		`{"tenant_id":"t","workflow_id":"demo-sleep","priority":"high"}`:    `"priority": must be a whole number`,
		`not json`: `must be a JSON object`,
		`{"tenant_id":"t","workflow_id":"demo-sleep","queue_timeout_seconds":-5}`: `"queue_timeout_seconds"`,
	}
	for body, want := range cases {
		_, err := Parse([]byte(body), cfg)
		var se *Error
		if !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want *Error containing %q", body, err, want)
		}
	}
	big := `{"tenant_id":"t","workflow_id":"demo-sleep","input":{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}}`
	if _, err := Parse([]byte(big), cfg); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("oversize submission: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	cfg := fleetconfig.Default()
	f.Add([]byte(`{"tenant_id":"t","workflow_id":"demo-sleep","input":{"seconds":1}}`))
	f.Add([]byte(`{"job_id":"x","tenant_id":"t","workflow_id":"demo-exec","priority":-3}`))
	f.Add([]byte(`{"tenant_id":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, cfg)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *submission.Error", err)
			}
			return
		}
		if s.TenantID == "" || s.WorkflowID == "" {
			t.Fatalf("accepted %q without tenant or workflow", data)
		}
		if _, ok := cfg.FleetForWorkflow(s.WorkflowID); !ok {
			t.Fatalf("accepted an unserved workflow %q", s.WorkflowID)
		}
	})
}

// object returns a JSON object of exactly n bytes.
func object(n int) string {
	return `{"x":"` + strings.Repeat("a", n-len(`{"x":""}`)) + `"}`
}

func TestInputAndResultBudget(t *testing.T) {
	cfg := fleetconfig.Default()
	if ItemReserveBytes < 32<<10 {
		t.Fatalf("input and result leave %d bytes of the item for everything else", ItemReserveBytes)
	}
	sub := func(input string) string {
		return `{"tenant_id":"t","workflow_id":"demo-sleep","input":` + input + `}`
	}
	s, err := Parse([]byte(sub(object(MaxInputBytes))), cfg)
	if err != nil || len(s.Input) != MaxInputBytes {
		t.Fatalf("an input of exactly the budget: %d bytes, %v", len(s.Input), err)
	}
	_, err = Parse([]byte(sub(object(MaxInputBytes+1))), cfg)
	var se *Error
	if !errors.As(err, &se) || !se.TooLarge || !strings.Contains(se.Msg, `field "input"`) || !strings.Contains(se.Msg, "at most 196608") {
		t.Fatalf("an input one byte over the budget: %v", err)
	}
	if err := CheckResult([]byte(object(MaxResultBytes))); err != nil {
		t.Fatalf("a result of exactly the budget: %v", err)
	}
	err = CheckResult([]byte(object(MaxResultBytes + 1)))
	if !errors.As(err, &se) || !se.TooLarge || !strings.Contains(se.Msg, `field "result"`) {
		t.Fatalf("a result one byte over the budget: %v", err)
	}
	big := sub(`{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}`)
	if _, err := Parse([]byte(big), cfg); !errors.As(err, &se) || !se.TooLarge {
		t.Fatalf("a body over MaxBodyBytes is too large: %v", err)
	}
}

// nested is an input object nested n levels deep (the object itself is the first).
func nested(n int, inner string) string {
	return strings.Repeat(`{"a":`, n-1) + `{"s":"` + inner + `"}` + strings.Repeat(`}`, n-1)
}

func TestInputNestingIsBoundedAtDynamoDBsLimit(t *testing.T) {
	cfg := fleetconfig.Default()
	sub := func(input string) error {
		_, err := Parse([]byte(`{"tenant_id":"t","workflow_id":"demo-sleep","input":`+input+`}`), cfg)
		return err
	}
	// Brackets and escaped quotes inside strings are not nesting.
	if err := sub(nested(MaxInputDepth, `[[{{\"[[`)); err != nil {
		t.Fatalf("an input %d levels deep: %v", MaxInputDepth, err)
	}
	for _, in := range []string{nested(MaxInputDepth+1, "x"), nested(100, "x"), strings.Repeat(`{"a":[`, 17) + `1` + strings.Repeat(`]}`, 17)} {
		err := sub(in)
		var se *Error
		if !errors.As(err, &se) || se.TooLarge || !strings.Contains(se.Msg, `"input": nested`) || !strings.Contains(se.Msg, "at most 32 levels") {
			t.Fatalf("an input past %d levels: %v", MaxInputDepth, err)
		}
	}
}

// TestJobIDLimits: a job key is 1-128 characters, and a job's full id (the
// tenant, ':' and the key, as the API puts it on the queue) is accepted up
// to the longest tenant id and the longest key, tenant.MaxJobIDLength.
func TestJobIDLimits(t *testing.T) {
	cfg := fleetconfig.Default()
	longTenant := strings.Repeat("t", tenant.MaxIDLength)
	parse := func(tenantID, jobID string) error {
		body, _ := json.Marshal(map[string]any{"tenant_id": tenantID, "workflow_id": "demo-sleep", "job_id": jobID})
		_, err := Parse(body, cfg)
		return err
	}
	key := strings.Repeat("k", tenant.MaxJobKeyLength)
	full := tenant.JobID(longTenant, key)
	if len(full) != tenant.MaxJobIDLength || tenant.MaxJobIDLength != 161 {
		t.Fatalf("the longest full id is %d characters, MaxJobIDLength %d", len(full), tenant.MaxJobIDLength)
	}
	for _, c := range []struct{ tenant, id string }{{"t", key}, {longTenant, key}, {longTenant, full}, {"t", "t:" + key}, {"t", "t:a:b"}} {
		if err := parse(c.tenant, c.id); err != nil {
			t.Errorf("tenant %s, job_id of %d characters: %v", c.tenant, len(c.id), err)
		}
	}
	for _, c := range []struct{ tenant, id string }{{"t", key + "k"}, {longTenant, full + "k"}, {"t", "t:"}, {"t", "u:" + key}} {
		if err := parse(c.tenant, c.id); err == nil || !strings.Contains(err.Error(), `"job_id"`) {
			t.Errorf("tenant %s, job_id %.20q… of %d characters: %v, want refused", c.tenant, c.id, len(c.id), err)
		}
	}
}
