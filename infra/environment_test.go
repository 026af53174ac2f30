package infra_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fleetq/fleetq/infra"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/apifn"
	"github.com/fleetq/fleetq/pkg/service/system/dispatchfn"
	"github.com/fleetq/fleetq/pkg/service/system/interruptionfn"
	"github.com/fleetq/fleetq/pkg/service/system/scalerfn"
)

// variant is a stage's config as an operator would write it: a shipped
// config, or one with a feature turned on that changes the template.
type variant struct {
	name  string
	synth func(t *testing.T) synthesized
}

// fromProd synthesizes the prod config edited by edit (which must change it).
func fromProd(name string, edit func(string) string) variant {
	return variant{name, func(t *testing.T) synthesized {
		t.Helper()
		_, raw, err := infra.LoadConfig("prod", "")
		if err != nil {
			t.Fatal(err)
		}
		text := edit(string(raw))
		if text == string(raw) {
			t.Fatalf("%s: the edit changed nothing in the prod config", name)
		}
		file := filepath.Join(t.TempDir(), "prod.yaml")
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, raw, err := infra.LoadConfig("prod", file)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return synthConfig(t, name, cfg, raw)
	}}
}

// videoFleet is the prod fleet the variants change.
const videoFleet = "  - slug: video-a10g\n"

// variants are every shipped config (config/*.yaml) and the features that
// add or change variables: the On-Demand rung, its warm pool, a bridge,
// the forecast, tenants, webhooks and an existing VPC.
func variants(t *testing.T) []variant {
	files, err := filepath.Glob("../config/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped configs: %v", err)
	}
	var out []variant
	for _, f := range files {
		stage := strings.TrimSuffix(filepath.Base(f), ".yaml")
		out = append(out, variant{stage, func(t *testing.T) synthesized { return synth(t, stage) }})
	}
	return append(out,
		variant{"on-demand", synthOnDemand},
		variant{"warm-pool", func(t *testing.T) synthesized {
			return synthOnDemandWith(t, "prod-warm-pool-hibernated", "      warm_pool:\n        size: 2\n        state: hibernated\n")
		}},
		fromProd("prod-bridge", func(s string) string {
			return strings.Replace(s, videoFleet, videoFleet+"    bridge:\n      pool: 3\n", 1)
		}),
		fromProd("prod-forecast", func(s string) string {
			return strings.Replace(s, videoFleet, videoFleet+"    forecast:\n      enabled: true\n      budget_gpu_hours_per_day: 4\n", 1)
		}),
		fromProd("prod-tenants", func(s string) string {
			return s + "\ntenants:\n  - id: acme\n    max_queued: 100\n    weight: 2\n  - id: \"*\"\n    max_queued: 10\n"
		}),
		fromProd("prod-webhooks", func(s string) string {
			return s + "\nwebhooks:\n  allowed_hosts: [hooks.example.com]\n"
		}),
		fromProd("prod-own-vpc", func(s string) string {
			i, j := strings.Index(s, "network:\n"), strings.Index(s, "alarms:\n")
			return s[:i] + "network:\n  vpc_id: vpc-0123456789abcdef0\n  subnet_ids: [subnet-0aaa, subnet-0bbb]\n" +
				"  availability_zones: [us-east-1a, us-east-1b]\n" + s[j:]
		}),
	)
}

// functionEnvironments returns each function's environment in the template
// as Lambda would hand it to the process: intrinsic functions resolved to
// stand-in values of the same shape, the package root (/var/task) mapped to
// a directory holding the deployed fleet.yaml.
func (s synthesized) functionEnvironments(t *testing.T, taskRoot string) map[awsenv.Function]map[string]string {
	t.Helper()
	out := map[awsenv.Function]map[string]string{}
	for id, f := range s.resources("AWS::Lambda::Function") {
		name, _ := f["FunctionName"].(string)
		fn, ok := strings.CutPrefix(name, "fleetq-"+s.cfg.Stage+"-")
		if !ok || !slices.Contains(infra.Functions, fn) {
			continue // the CDK's own helpers (bucket auto-delete, log retention)
		}
		vars := map[string]string{}
		env, _ := f["Environment"].(map[string]any)
		raw, _ := env["Variables"].(map[string]any)
		for k, v := range raw {
			val, err := resolve(v)
			if err != nil {
				t.Fatalf("%s: %s: %v", id, k, err)
			}
			vars[k] = strings.Replace(val, "/var/task/", taskRoot+"/", 1)
		}
		out[awsenv.Function(fn)] = vars
	}
	if len(out) != len(awsenv.Functions) {
		t.Fatalf("functions in the template %v, want %v", slices.Collect(maps.Keys(out)), awsenv.Functions)
	}
	return out
}

// resolve turns a template value into the string Lambda would see, with
// stand-ins for what only a deployment knows: a Ref is "ref-<id>", a
// role's Arn an IAM role ARN of that name, another attribute
// "<id>.<attribute>", the region's zones us-east-1a to c.
func resolve(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case float64, bool, int:
		return fmt.Sprint(v), nil
	case map[string]any:
		if len(v) != 1 {
			return "", fmt.Errorf("not an intrinsic function: %v", v)
		}
		for k, arg := range v {
			switch k {
			case "Ref":
				return "ref-" + arg.(string), nil
			case "Fn::GetAtt":
				a := arg.([]any)
				if id := fmt.Sprint(a[0]); a[1] == "Arn" && strings.Contains(id, "Role") {
					return "arn:aws:iam::123456789012:role/" + id, nil
				}
				return fmt.Sprint(a[0], ".", a[1]), nil
			case "Fn::Join":
				a := arg.([]any)
				var parts []string
				for _, p := range a[1].([]any) {
					s, err := resolve(p)
					if err != nil {
						return "", err
					}
					parts = append(parts, s)
				}
				return strings.Join(parts, a[0].(string)), nil
			case "Fn::Select":
				a := arg.([]any)
				i := int(a[0].(float64))
				list, err := resolveList(a[1])
				if err != nil {
					return "", err
				}
				if i >= len(list) {
					return "", fmt.Errorf("Fn::Select %d of %v", i, list)
				}
				return list[i], nil
			}
			return "", fmt.Errorf("intrinsic %s is not resolved by this test", k)
		}
	}
	return "", fmt.Errorf("value %v (%T)", v, v)
}

func resolveList(v any) ([]string, error) {
	if m, ok := v.(map[string]any); ok {
		if _, ok := m["Fn::GetAZs"]; ok {
			return []string{"us-east-1a", "us-east-1b", "us-east-1c"}, nil
		}
	}
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("not a list: %v", v)
	}
	var out []string
	for _, x := range a {
		s, err := resolve(x)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// functions are the functions as their mains start them, by name.
var functions = map[awsenv.Function]system.Function{awsenv.API: apifn.Function, awsenv.Dispatch: dispatchfn.Function,
	awsenv.Scaler: scalerfn.Function, awsenv.Interruption: interruptionfn.Function, awsenv.Wait: apifn.WaitFunction}

// environmentProblems starts fn exactly as its main does (system.BuildLambda)
// with vars as its whole environment, and answers what is wrong: the
// function failing to start, a variable it read that vars does not set
// (unless awsenv.Vars marks it as set only by hand, like the endpoint
// overrides), or a variable vars sets that it never read.
func environmentProblems(fn awsenv.Function, vars map[string]string) []string {
	var mu sync.Mutex
	read := map[string]bool{}
	getenv := func(k string) string {
		mu.Lock()
		defer mu.Unlock()
		read[k] = true
		return vars[k]
	}
	var problems []string
	f, ok := functions[fn]
	if !ok {
		return []string{"has no package under pkg/service/system"}
	}
	if _, err := system.BuildLambda(context.Background(), f, getenv, io.Discard, io.Discard); err != nil {
		problems = append(problems, "does not start: "+err.Error())
	}
	for _, k := range slices.Sorted(maps.Keys(read)) {
		if _, set := vars[k]; !set && !awsenv.ByHandFor(fn, k) {
			problems = append(problems, "reads "+k+", which the stack does not set")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if !read[k] {
			problems = append(problems, "is given "+k+" but never reads it")
		}
	}
	return problems
}

// Each function of every shipped config and variant starts with exactly
// the environment its template gives it, reads every variable it is given,
// and is given every variable it reads: the environment is declared once
// (awsenv.Vars), set from there by the stack and read from there by the
// functions.
func TestEnvironmentIsWhatEachFunctionReads(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1") // Lambda sets it; the SDK reads it
	for _, v := range variants(t) {
		t.Run(v.name, func(t *testing.T) {
			s := v.synth(t)
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, infra.ConfigFileName), s.raw, 0o600); err != nil {
				t.Fatal(err)
			}
			for fn, vars := range s.functionEnvironments(t, root) {
				if got, want := slices.Sorted(maps.Keys(vars)), awsenv.StackSets(fn, s.cfg); !slices.Equal(got, want) {
					t.Errorf("%s: the template sets %v, awsenv.Vars declares %v", fn, got, want)
				}
				for _, p := range environmentProblems(fn, vars) {
					t.Errorf("%s %s", fn, p)
				}
			}
		})
	}
}

// The check fails when either side drops a variable: a template without
// one the function reads (the On-Demand groups dispatch wakes), and a
// template with one the function ignores.
func TestEnvironmentCheckCatchesEitherSide(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	s := synthOnDemand(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, infra.ConfigFileName), s.raw, 0o600); err != nil {
		t.Fatal(err)
	}
	dispatch := s.functionEnvironments(t, root)[awsenv.Dispatch]
	if p := environmentProblems(awsenv.Dispatch, dispatch); len(p) != 0 {
		t.Fatalf("the template's own environment: %v", p)
	}
	unset := maps.Clone(dispatch)
	delete(unset, awsenv.EnvFleetOnDemandGroups)
	if p := strings.Join(environmentProblems(awsenv.Dispatch, unset), "; "); !strings.Contains(p, "reads "+awsenv.EnvFleetOnDemandGroups+", which the stack does not set") ||
		!strings.Contains(p, "does not start") {
		t.Errorf("dispatch without its On-Demand groups: %q", p)
	}
	extra := maps.Clone(dispatch)
	extra[awsenv.EnvBucket] = "ref-Assets"
	if p := strings.Join(environmentProblems(awsenv.Dispatch, extra), "; "); !strings.Contains(p, "is given "+awsenv.EnvBucket+" but never reads it") {
		t.Errorf("dispatch given the bucket: %q", p)
	}
}
