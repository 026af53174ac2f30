package api_test

import (
	"testing"

	"github.com/fleetq/fleetq/pkg/service/api"
)

// schemeOf is the OpenAPI security schemes of each credential.
var schemeOf = map[api.Auth][]string{
	api.AuthFleetSecret:  {"awsIdentity", "fleetSecret"},
	api.AuthWorker:       {"workerToken"},
	api.AuthOperator:     {"awsSigV4", "operatorToken"},
	api.AuthProducer:     {"apiKey", "awsSigV4", "operatorToken"},
	api.AuthConsole:      {"consoleSession"},
	api.AuthConsoleLogin: {"consoleLogin"},
}

// TestContractListsEveryRoute keeps the OpenAPI document and the router in
// step: every route is an operation with its credential's security
// schemes, and every operation is a route.
func TestContractListsEveryRoute(t *testing.T) {
	t.Parallel()
	v, err := contract()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{}
	for _, op := range v.Operations() {
		documented[op.Method+" "+op.Path] = op.Schemes
	}
	served := map[string]bool{}
	for _, r := range api.Routes() {
		key := r.Method + " " + r.Pattern
		served[key] = true
		schemes, ok := documented[key]
		if !ok {
			t.Errorf("the router serves %s, which the OpenAPI document does not describe", key)
			continue
		}
		want := schemeOf[r.Auth]
		if len(want) == 0 {
			t.Errorf("%s: no security scheme is known for %q", key, r.Auth)
		}
		if len(schemes) != len(want) {
			t.Errorf("%s: the document's security is %v; the router requires %q (%v)", key, schemes, r.Auth, want)
			continue
		}
		for i := range want {
			if schemes[i] != want[i] {
				t.Errorf("%s: the document's security is %v; the router requires %q (%v)", key, schemes, r.Auth, want)
				break
			}
		}
	}
	for key := range documented {
		if !served[key] {
			t.Errorf("the OpenAPI document describes %s, which the router does not serve", key)
		}
	}
	if len(served) == 0 {
		t.Fatal("api.Routes() is empty")
	}
}
