package fleetconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/config"
)

const minimal = `
stage: test
fleets:
  - slug: gpu
    workflows: [wf-a, wf-b]
    instance_types: [g5.xlarge]
`

func TestParseAppliesDefaults(t *testing.T) {
	cfg, err := Parse("minimal.yaml", []byte(minimal))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	f, ok := cfg.Fleet("gpu")
	if !ok {
		t.Fatal("fleet gpu not found")
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"worker_cap", f.WorkerCap, DefaultWorkerCap},
		{"max_attempts", f.Retry.MaxAttempts, 3},
		{"backoff", len(f.Retry.Backoff), 3},
		{"backoff[0]", f.Retry.Backoff[0].Std(), 2 * time.Minute},
		{"backoff[2]", f.Retry.Backoff[2].Std(), 30 * time.Minute},
		{"preemption_cap", f.PreemptionCap, 5},
		{"idle_window", f.IdleWindow.Std(), 15 * time.Minute},
		{"require_approval", f.RequireApproval, false},
		{"lease_seconds", f.LeaseSeconds, 120},
		{"heartbeat_seconds", f.HeartbeatSeconds, 30},
		{"ready_shards", f.ReadyShards, 1},
		{"job_retention", cfg.JobRetention.Std(), 30 * 24 * time.Hour},
		{"registration_limit", cfg.RegistrationLimit, 10},
		{"slots", f.SlotsPerInstance, 1},
		{"queue_slo", f.QueueSLO.Std(), 30 * time.Minute},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if g, ok := cfg.FleetForWorkflow("wf-b"); !ok || g.Slug != "gpu" {
		t.Errorf("FleetForWorkflow(wf-b) = %v, %v", g, ok)
	}
	if _, ok := cfg.FleetForWorkflow("nope"); ok {
		t.Error("FleetForWorkflow(nope) found a fleet")
	}
}

func TestFleetWithoutWorkflowsIsValid(t *testing.T) {
	// A fleet may be declared before any workflow is assigned to it; its
	// workers are then refused at registration (422 no_workflows).
	cfg, err := Parse("f.yaml", []byte("stage: s\nfleets:\n  - slug: a\n    instance_types: [g5.xlarge]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := cfg.Fleet("a"); len(f.Workflows) != 0 {
		t.Fatalf("workflows = %v", f.Workflows)
	}
}

func TestBackoffBefore(t *testing.T) {
	r := RetryPolicy{Backoff: []Duration{Duration(time.Minute), Duration(5 * time.Minute)}}
	for n, want := range map[int]time.Duration{0: time.Minute, 1: time.Minute, 2: 5 * time.Minute, 9: 5 * time.Minute} {
		if got := r.BackoffBefore(n); got != want {
			t.Errorf("BackoffBefore(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestDurationsAcceptSecondsAndStrings(t *testing.T) {
	doc := minimal + "    idle_window: 600\n    scale_in_grace: 90s\n"
	cfg, err := Parse("d.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	f := cfg.Fleets[0]
	if f.IdleWindow.Std() != 10*time.Minute || f.ScaleInGrace.Std() != 90*time.Second {
		t.Fatalf("idle=%s grace=%s", f.IdleWindow, f.ScaleInGrace)
	}
}

func TestValidationNamesFileFieldAndProblem(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want string // substring of the error: "file: field: problem"
	}{
		{"no stage", "fleets:\n  - slug: a\n    workflows: [w]\n    instance_types: [g5.xlarge]\n", "bad.yaml: stage: is required"},
		{"no fleets", "stage: s\n", "bad.yaml: fleets: at least one fleet is required"},
		{"unknown field", minimal + "    colour: red\n", "bad.yaml:7: fleets[0].colour: unknown field"},
		{"bad slug", strings.Replace(minimal, "slug: gpu", "slug: GPU_1", 1), `bad.yaml:4: fleets[0].slug: "GPU_1" must be lowercase`},
		{"min over max", minimal + "    min_instances: 5\n    max_instances: 2\n", "fleets[0].max_instances: must be at least min_instances (5), got 2"},
		{"workflow in two fleets", minimal + "  - slug: other\n    workflows: [wf-a]\n    instance_types: [g5.xlarge]\n", `fleets[1].workflows[0]: workflow "wf-a" is already served by fleet "gpu"`},
		{"heartbeat too slow", minimal + "    lease_seconds: 60\n    heartbeat_seconds: 40\n", "fleets[0].heartbeat_seconds: must be at most half of lease_seconds (60)"},
		{"ready shards out of range", minimal + "    ready_shards: 17\n", "fleets[0].ready_shards: must be between 1 and 16, got 17"},
		{"bad duration", minimal + "    idle_window: soon\n", `"soon" is not a duration`},
		{"attempts out of range", minimal + "    retry:\n      max_attempts: 99\n", "fleets[0].retry.max_attempts: must be between 1 and 20, got 99"},
		{"bad instance type", strings.Replace(minimal, "g5.xlarge", "big-gpu", 1), `fleets[0].instance_types[0]: "big-gpu" is not an EC2 instance type`},
		{"exec runner without command", minimal + "    agent:\n      runner: exec\n", "fleets[0].agent.exec: is required when agent.runner is exec"},
		{"bad ami", minimal + "    ami_id: ubuntu\n", `fleets[0].ami_id: "ubuntu" is not an AMI id`},
		{"duplicate slug", minimal + "  - slug: gpu\n    workflows: [wf-c]\n    instance_types: [g5.xlarge]\n", `fleets[1].slug: "gpu" is already used by fleets[0]`},
		{"empty", "", "bad.yaml: (file): is empty"},
		{"zone of another region", "region: us-west-1\nnetwork:\n  availability_zones: [us-east-1a, us-west-1b]\n" + minimal, `network.availability_zones[0]: "us-east-1a" is not a zone of region us-west-1`},
		{"digest without url", "agent_sha256: " + strings.Repeat("a", 64) + "\n" + minimal, "agent_sha256: is only used with agent_url"},
		{"bad digest", "agent_url: https://example.com/fleetq\nagent_sha256: abc\n" + minimal, "agent_sha256: must be 64 lowercase hex digits"},
		{"plain http agent", "agent_url: http://example.com/fleetq\n" + minimal, `agent_url: "http://example.com/fleetq" must be an https:// or s3:// URL`},
		{"bad alarm email", "alarms:\n  emails: [ops]\n" + minimal, `alarms.emails[0]: "ops" is not an email address`},
		{"slo too short", minimal + "    queue_slo: 10s\n", "fleets[0].queue_slo: must be between 1m and 24h, got 10s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(c.doc))
			if err == nil {
				t.Fatalf("Parse accepted an invalid config")
			}
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("error %T is not a *ValidationError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n%s\ndoes not contain\n%s", err, c.want)
			}
		})
	}
}

func TestValidationReportsEveryProblem(t *testing.T) {
	doc := "stage: Bad\nfleets:\n  - slug: a\n    workflows: [w]\n    instance_types: [x]\n    worker_cap: -1\n"
	_, err := Parse("f.yaml", []byte(doc))
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("got %v", err)
	}
	if len(verr.Problems) < 3 {
		t.Fatalf("want at least 3 problems, got %d: %v", len(verr.Problems), err)
	}
}

func TestLoadReadsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source() != path || cfg.Stage != "test" {
		t.Fatalf("source=%q stage=%q", cfg.Source(), cfg.Stage)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
}

func TestBuiltInConfigsAreValid(t *testing.T) {
	for _, stage := range config.Stages() {
		cfg, err := ForStage(stage)
		if err != nil {
			t.Fatalf("stage %s: %v", stage, err)
		}
		if cfg.Stage != stage {
			t.Errorf("config/%s.yaml declares stage %q", stage, cfg.Stage)
		}
	}
	def := Default()
	if def.Stage != "dev" {
		t.Fatalf("default stage = %q", def.Stage)
	}
	if _, ok := def.FleetForWorkflow("demo-sleep"); !ok {
		t.Fatal("the built-in config has no fleet serving demo-sleep")
	}
	if _, err := ForStage("nowhere"); err == nil {
		t.Fatal("ForStage(nowhere) succeeded")
	}
}

func TestWebhooks(t *testing.T) {
	cfg, err := Parse("hooks.yaml", []byte("webhooks:\n  allowed_hosts: [hooks.example.com, \"*.example.org\"]\n"+minimal))
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Webhooks
	if w.MaxAttempts != DefaultWebhookAttempts || w.Timeout.Std() != DefaultWebhookTimeout {
		t.Fatalf("defaults: %+v", w)
	}
	for host, want := range map[string]bool{"hooks.example.com": true, "HOOKS.example.com.": true, "a.b.example.org": true,
		"example.org": false, "xhooks.example.com": false, "hooks.example.com.evil": false, "localhost": false} {
		if got := w.HostAllowed(host); got != want {
			t.Errorf("HostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
	ports := Webhooks{AllowedHosts: []string{"hooks.example.com", "alt.example.com:8443", "*.example.org:9000", "10.0.0.1", "*.0.1.example"}}
	for _, c := range []struct {
		host string
		port int
		want bool
	}{
		{"hooks.example.com", 443, true},
		{"hooks.example.com", 8443, false},
		{"hooks.example.com", 80, false},
		{"hooks.example.com", 0, false},
		{"alt.example.com", 8443, true},
		{"alt.example.com", 443, false},
		{"a.example.org", 9000, true},
		{"a.example.org", 443, false},
		{"10.0.0.1", 443, true}, // an exact entry may be an address
		{"10.0.0.1", 80, false},
		// A wildcard never matches an address, nor a name a resolver
		// reads as one (its last label is a number).
		{"127.0.0.1", 443, false},
		{"10.0.1.0.1", 443, false},
		{"x.0.1.example", 443, true},
	} {
		if got := ports.Allowed(c.host, c.port); got != c.want {
			t.Errorf("Allowed(%q, %d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	numeric := Webhooks{AllowedHosts: []string{"*.0.1", "*.1"}}
	for _, h := range []string{"127.0.0.1", "10.0.0.1", "1.0.0.1", "0x7f.0.0.1", "a.0.1"} {
		if numeric.HostAllowed(h) {
			t.Errorf("a wildcard ending in a number matched %q", h)
		}
	}
	for doc, want := range map[string]string{
		"webhooks:\n  allowed_hosts: [\"https://x.example.com\"]\n":      `webhooks.allowed_hosts[0]: "https://x.example.com": must be a lowercase host name or IPv4 address`,
		"webhooks:\n  allowed_hosts: [\"*.0.1\"]\n":                      `"*.0.1": a wildcard matches DNS names only`,
		"webhooks:\n  allowed_hosts: [\"*.10.in-addr.arpa\", \"*.2\"]\n": `webhooks.allowed_hosts[1]: "*.2": a wildcard matches DNS names only`,
		"webhooks:\n  allowed_hosts: [\"x.example.com:0\"]\n":            `port "0" must be a number from 1 to 65535`,
		"webhooks:\n  allowed_hosts: [\"x.example.com:65536\"]\n":        `port "65536"`,
		"webhooks:\n  allowed_hosts: [\"x.example.com:08443\"]\n":        `port "08443"`,
		"webhooks:\n  allowed_hosts: [\"x.example.com:\"]\n":             `"x.example.com:": must be a lowercase host name`,
		"webhooks:\n  allowed_hosts: [\"x.example.com:443/path\"]\n":     `(no scheme or path)`,
		"webhooks:\n  max_attempts: 50\n":                                "webhooks.max_attempts: must be between 1 and 20, got 50",
		"webhooks:\n  timeout: 5m\n":                                     "webhooks.timeout: must be between 1s and 15s",
	} {
		if _, err := Parse("hooks.yaml", []byte(doc+minimal)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", doc, err, want)
		}
	}
}
