package infra_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/infra"
	"github.com/fleetq/fleetq/pkg/service/api"
)

// invokeRoutes returns the "METHOD /path" of each execute-api resource of a
// managed policy whose description contains who, failing the test unless
// the policy allows execute-api:Invoke and nothing else.
func invokeRoutes(t *testing.T, s synthesized, who string) []string {
	t.Helper()
	var found []map[string]any
	for _, p := range s.resources("AWS::IAM::ManagedPolicy") {
		if d, _ := p["Description"].(string); strings.Contains(d, who) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one managed policy for %q, got %d", who, len(found))
	}
	var routes []string
	for _, st := range found[0]["PolicyDocument"].(map[string]any)["Statement"].([]any) {
		st := st.(map[string]any)
		if st["Effect"] != "Allow" || st["Action"] != "execute-api:Invoke" {
			t.Errorf("%s policy: statement %v grants more than execute-api:Invoke", who, st)
		}
		res, ok := st["Resource"].([]any)
		if !ok {
			res = []any{st["Resource"]}
		}
		for _, r := range res {
			// {"Fn::Join": ["", ["arn:", {Ref: Partition}, ..., {Ref: HttpApi}, "/$default/POST/api/jobs"]]}
			parts := r.(map[string]any)["Fn::Join"].([]any)[1].([]any)
			api, _ := parts[len(parts)-2].(map[string]any)["Ref"].(string)
			if !strings.HasPrefix(api, "HttpApi") {
				t.Errorf("%s policy: resource %v is not on the stage's HTTP API", who, r)
			}
			tail := parts[len(parts)-1].(string)
			rest, ok := strings.CutPrefix(tail, "/$default/")
			if !ok {
				t.Errorf("%s policy: resource %v is not on the $default stage", who, r)
				continue
			}
			method, path, _ := strings.Cut(rest, "/")
			routes = append(routes, method+" /"+path)
		}
	}
	slices.Sort(routes)
	return routes
}

func TestProducerAndOperatorPolicies(t *testing.T) {
	s := synth(t, "prod")
	producer := invokeRoutes(t, s, "producer routes")
	want := []string{"GET /api/jobs", "GET /api/jobs/*", "GET /api/jobs/*/logs", "GET /api/jobs/*/wait", "POST /api/jobs", "POST /api/jobs/*/cancel", "POST /api/uploads"}
	if !slices.Equal(producer, want) {
		t.Errorf("producer policy routes:\n got %v\nwant %v", producer, want)
	}

	// The operator policy is every IAM-authorized route of the API, no more.
	var operatorWant []string
	for _, r := range api.Routes() {
		if infra.IAMRoute(r) {
			operatorWant = append(operatorWant, r.Method+" "+infra.ExecuteAPIPath(r.Pattern))
		}
	}
	slices.Sort(operatorWant)
	operator := invokeRoutes(t, s, "operator")
	if !slices.Equal(operator, operatorWant) {
		t.Errorf("operator policy routes:\n got %v\nwant %v", operator, operatorWant)
	}
	for _, r := range operator {
		if strings.Contains(r, "/api/worker/") {
			t.Errorf("operator policy grants the worker route %s", r)
		}
	}
	if !slices.Contains(operator, fmt.Sprintf("%s /api/admin/workers/*/*", http.MethodPost)) {
		t.Errorf("operator policy lacks the worker actions: %v", operator)
	}

	outputs := s.json["Outputs"].(map[string]any)
	for _, o := range []string{"ProducerPolicyArn", "OperatorPolicyArn"} {
		if _, ok := outputs[o]; !ok {
			t.Errorf("no %s output", o)
		}
	}
}

func TestExecuteAPIPath(t *testing.T) {
	for in, want := range map[string]string{
		"/api/jobs":                               "/api/jobs",
		"/api/jobs/{job_id}/cancel":               "/api/jobs/*/cancel",
		"/api/admin/workers/{worker_id}/{action}": "/api/admin/workers/*/*",
	} {
		if got := infra.ExecuteAPIPath(in); got != want {
			t.Errorf("ExecuteAPIPath(%q) = %q, want %q", in, got, want)
		}
	}
}
