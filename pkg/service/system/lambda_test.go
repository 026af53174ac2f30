package system

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

func env(m map[string]string) Getenv { return func(k string) string { return m[k] } }

func TestLoadBuiltInStage(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	e, err := LoadLambda(context.Background(), awsenv.API, env(map[string]string{awsenv.EnvStage: "dev"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if e.Config.Stage != "dev" || e.Table != "fleetq-dev" {
		t.Fatalf("stage %q table %q, want dev and the derived table name", e.Config.Stage, e.Table)
	}
	if _, err := e.Require(awsenv.EnvSubmitQueueURL); err == nil || !strings.Contains(err.Error(), awsenv.EnvSubmitQueueURL) {
		t.Fatalf("Require of an unset variable: %v, want an error naming it", err)
	}
}

// A function reads only what awsenv.Vars declares for it: anything else
// would never be set in AWS. BuildLambda turns such a read into an error.
func TestReadingAnUndeclaredVariableFails(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	e, err := LoadLambda(context.Background(), awsenv.Dispatch, env(map[string]string{awsenv.EnvStage: "dev"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), awsenv.EnvSubnets) || !strings.Contains(fmt.Sprint(r), "dispatch") {
				t.Errorf("dispatch read %s: recovered %v, want a panic naming both", awsenv.EnvSubnets, r)
			}
		}()
		e.Lookup(awsenv.EnvSubnets)
	}()
	saved := awsenv.Vars
	t.Cleanup(func() { awsenv.Vars = saved })
	// The API without the submission queue declared for it.
	awsenv.Vars = slices.DeleteFunc(slices.Clone(saved), func(v awsenv.Var) bool { return v.Name == awsenv.EnvSubmitQueueURL })
	readsQueue := Function{Name: awsenv.API, Handler: func(l *Lambda, _ io.Writer) (any, error) { return l.Require(awsenv.EnvSubmitQueueURL) }}
	_, err = BuildLambda(context.Background(), readsQueue, env(map[string]string{awsenv.EnvStage: "dev"}), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), awsenv.EnvSubmitQueueURL) || !strings.Contains(err.Error(), "does not declare") {
		t.Fatalf("BuildLambda with an undeclared read: %v", err)
	}
}

func TestLoadRefusesBadEnvironment(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	dir := t.TempDir()
	other := filepath.Join(dir, "other.yaml")
	data, _ := os.ReadFile("../../../config/prod.yaml")
	if err := os.WriteFile(other, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		vars map[string]string
		want string
	}{
		"no stage":       {map[string]string{}, awsenv.EnvStage},
		"unknown stage":  {map[string]string{awsenv.EnvStage: "nope"}, `stage "nope"`},
		"stage mismatch": {map[string]string{awsenv.EnvStage: "dev", awsenv.EnvConfigFile: other}, "stage"},
		"missing file":   {map[string]string{awsenv.EnvStage: "dev", awsenv.EnvConfigFile: filepath.Join(dir, "x.yaml")}, "x.yaml"},
		"bad log level":  {map[string]string{awsenv.EnvStage: "dev", awsenv.EnvLogLevel: "loud"}, awsenv.EnvLogLevel},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := LoadLambda(context.Background(), awsenv.Scaler, env(c.vars), io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestFleetGroups(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	for name, c := range map[string]struct{ groups, want string }{
		"unset":         {"", awsenv.EnvFleetGroups},
		"not JSON":      {"demo=fleetq-dev-demo", "JSON object"},
		"fleet missing": {`{"other":"g"}`, "fleet demo has no group"},
		"ok":            {`{"demo":"fleetq-dev-demo"}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := LoadLambda(context.Background(), awsenv.Scaler, env(map[string]string{awsenv.EnvStage: "dev", awsenv.EnvFleetGroups: c.groups}), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			g, err := e.FleetGroups()
			if c.want == "" {
				if err != nil || g.Names["demo"] != "fleetq-dev-demo" || g.Adapter == nil {
					t.Fatalf("groups %+v, %v", g, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestFleetOnDemandGroups(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	for name, c := range map[string]struct {
		rung         bool
		groups, want string
	}{
		"no rung, unset": {false, "", ""},
		"rung, unset":    {true, "", "fleet demo sets on_demand.fallback_after but has no On-Demand group"},
		"rung, not JSON": {true, "demo=x", "JSON object"},
		"rung, named":    {true, `{"demo":"fleetq-dev-demo-on-demand"}`, ""},
		"no rung, named": {false, `{"demo":"fleetq-dev-demo-on-demand"}`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := LoadLambda(context.Background(), awsenv.Scaler, env(map[string]string{awsenv.EnvStage: "dev",
				awsenv.EnvFleetGroups: `{"demo":"fleetq-dev-demo"}`, awsenv.EnvFleetOnDemandGroups: c.groups}), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.rung {
				e.Config.Fleets[0].OnDemand.FallbackAfter = fleetconfig.Duration(10 * time.Minute)
			}
			g, err := e.FleetGroups()
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want one mentioning %q", err, c.want)
				}
				return
			}
			// Without the rung the stack sets no On-Demand groups and none is read.
			if err != nil || (c.rung && c.groups != "") != g.HasOnDemand("demo") {
				t.Fatalf("groups %+v, %v", g, err)
			}
		})
	}
}

func TestFleetGroupsSubnets(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	for name, c := range map[string]struct{ subnets, want string }{
		"unset":        {"", ""},
		"not JSON":     {"subnet-a=us-east-1a", "JSON list"},
		"zone missing": {`[{"subnet":"subnet-a"}]`, "item 0 needs both subnet and zone"},
		"two zones":    {`[{"subnet":"subnet-a","zone":"us-east-1a"},{"subnet":"subnet-b","zone":"us-east-1b"}]`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := LoadLambda(context.Background(), awsenv.Scaler, env(map[string]string{awsenv.EnvStage: "dev",
				awsenv.EnvFleetGroups: `{"demo":"fleetq-dev-demo"}`, awsenv.EnvSubnets: c.subnets}), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			g, err := e.FleetGroups()
			if err != nil {
				t.Fatal(err)
			}
			err = e.Subnets(&g)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want one mentioning %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(g.SpotZones("demo"), ","); (c.subnets == "" && got != "") || (c.subnets != "" && got != "us-east-1a,us-east-1b") {
				t.Fatalf("zones %q", got)
			}
		})
	}
}

// The SDK's standard endpoint variables reach every client; a
// FLEETQ_<SERVICE>_ENDPOINT, when set, wins over them.
func TestStandardEndpointVariablesAreHonoured(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000")
	vars := map[string]string{awsenv.EnvStage: "dev"}
	e, err := LoadLambda(context.Background(), awsenv.API, env(vars), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]*string{
		"DynamoDB":        e.DynamoDB().Options().BaseEndpoint,
		"Secrets Manager": e.SecretsManager().Options().BaseEndpoint,
		"EventBridge":     e.EventBridge().Options().BaseEndpoint,
		"Auto Scaling":    e.AutoScaling().Options().BaseEndpoint,
	} {
		want := "http://127.0.0.1:4566"
		if name == "DynamoDB" {
			want = "http://127.0.0.1:8000"
		}
		if got == nil || *got != want {
			t.Errorf("%s endpoint %v, want %s", name, got, want)
		}
	}
	vars[awsenv.EnvDynamoDBEndpoint] = "http://127.0.0.1:9000"
	if got := e.DynamoDB().Options().BaseEndpoint; got == nil || *got != "http://127.0.0.1:9000" {
		t.Errorf("with %s: endpoint %v", awsenv.EnvDynamoDBEndpoint, got)
	}
}
