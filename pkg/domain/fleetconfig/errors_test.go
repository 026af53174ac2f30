package fleetconfig

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/config"
)

// docLine is the 1-based line of the first line of doc containing s.
func docLine(t *testing.T, doc, s string) int {
	t.Helper()
	for i, l := range strings.Split(doc, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q is not in the document", s)
	return 0
}

// TestConfigErrorsNameFileLineAndField: every mistake in a config file is
// told as file:line: field: problem, a misspelt field with the nearest
// field the config has at that place, a value of the wrong kind (a
// duration, a number, a list) with what it should be; and no message
// names a Go type.
func TestConfigErrorsNameFileLineAndField(t *testing.T) {
	prod, ok := config.Stage("prod")
	if !ok {
		t.Fatal("no shipped prod config")
	}
	shipped := string(prod)
	cases := []struct {
		name, doc, at, want string
	}{
		{"typo in a fleet", strings.Replace(shipped, "max_instances: 1\n", "max_instance: 1\n", 1), "max_instance: 1",
			`fleets[0].max_instance: unknown field; did you mean max_instances?`},
		{"typo at the top", strings.Replace(shipped, "region:", "regoin:", 1), "regoin:", `regoin: unknown field; did you mean region?`},
		{"typo in a nested block", strings.Replace(shipped, "runner: comfyui", "runer: comfyui", 1), "runer: comfyui",
			`fleets[1].agent.runer: unknown field; did you mean runner?`},
		{"typo in a list of tenants", "tenants:\n  - id: acme\n    max_queud: 5\n" + minimal, "max_queud", `tenants[0].max_queud: unknown field; did you mean max_queued?`},
		{"nothing near", minimal + "    colour: red\n", "colour", `fleets[0].colour: unknown field (the fields here: slug, description,`},
		{"bad duration", minimal + "    idle_window: soon\n", "idle_window", `fleets[0].idle_window: "soon" is not a duration (write e.g. 90s, 15m, 1h30m)`},
		{"bad duration in a list", minimal + "    retry:\n      backoff: [1m, later]\n", "backoff", `fleets[0].retry.backoff[1]: "later" is not a duration`},
		{"not a number", minimal + "    max_instances: ten\n", "max_instances", `fleets[0].max_instances: "ten" is not a whole number`},
		{"not a list", minimal + "    instance_types: g5.xlarge\n", "instance_types: g5", `fleets[0].instance_types: must be a list`},
		{"not a mapping", "network: 10.0.0.0/16\n" + minimal, "network:", `network: must be a mapping of fields`},
		{"not true or false", minimal + "    accept_secret: maybe\n", "accept_secret", `fleets[0].accept_secret: "maybe" is not true or false`},
		{"a rule broken", minimal + "    min_instances: 5\n    max_instances: 2\n", "max_instances: 2", `fleets[0].max_instances: must be at least min_instances (5), got 2`},
		{"a bad item of a list", strings.Replace(shipped, "g6.xlarge, g6.2xlarge, g5.xlarge", "g6.xlarge, big gpu", 1), "big gpu", `fleets[2].instance_types[1]: "big gpu" is not an EC2 instance type`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("config/prod.yaml", []byte(c.doc))
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("error %v is not a *ValidationError", err)
			}
			want := "config/prod.yaml:" + strconv.Itoa(docLine(t, c.doc, c.at)) + ": " + c.want
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error\n%s\ndoes not contain\n%s", err, want)
			}
			for _, leak := range []string{"fleetconfig.", "in type ", "into ", "unmarshal", "!!", "yaml: "} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("error %q names %q", err, leak)
				}
			}
		})
	}
}

func TestNearestField(t *testing.T) {
	fields := []string{"max_instances", "min_instances", "idle_window", "instance_types", "slug"}
	for in, want := range map[string]string{"max_instance": "max_instances", "maxinstances": "max_instances", "idle-window": "idle_window",
		"instance_type": "instance_types", "slgu": "slug", "colour": "", "region": ""} {
		if got := nearest(in, fields); got != want {
			t.Errorf("nearest(%q) = %q, want %q", in, got, want)
		}
	}
}
