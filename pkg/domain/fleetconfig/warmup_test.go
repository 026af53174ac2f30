package fleetconfig

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWarmupInConfig(t *testing.T) {
	cfg, err := Parse("f.yaml", []byte(minimal+"    agent:\n      warmup:\n        workflow: /opt/fleetq/warmup.json\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Fleets[0].Agent.Warmup
	if !w.Enabled() || w.Workflow != "/opt/fleetq/warmup.json" || w.Timeout.Std() != DefaultWarmupTimeout || w.InputJSON() != nil {
		t.Fatalf("warm-up = %+v", w)
	}
	cfg, err = Parse("f.yaml", []byte(minimal+"    agent:\n      runner: sleep\n      warmup:\n        input: {seconds: 20, scene: {models: [a, b]}}\n        timeout: 2m\n"))
	if err != nil {
		t.Fatal(err)
	}
	w = cfg.Fleets[0].Agent.Warmup
	if got := string(w.InputJSON()); got != `{"scene":{"models":["a","b"]},"seconds":20}` || w.Timeout.Std() != 2*time.Minute {
		t.Fatalf("warm-up input %s, timeout %s", got, w.Timeout)
	}
	cfg, err = Parse("f.yaml", []byte(minimal))
	if err != nil || cfg.Fleets[0].Agent.Warmup.Enabled() || cfg.Fleets[0].Agent.Warmup.Timeout != 0 {
		t.Fatalf("a fleet without a warm-up: %+v, %v", cfg.Fleets[0].Agent.Warmup, err)
	}
	bad := []struct{ doc, want string }{
		{minimal + "    agent:\n      warmup:\n        exec: /opt/warm\n        input: {seconds: 1}\n", "fleets[0].agent.warmup: set one of workflow, input and exec"},
		{minimal + "    agent:\n      runner: exec\n      exec: run\n      warmup:\n        workflow: /opt/w.json\n", "fleets[0].agent.warmup.workflow: is run by the comfyui runner; with agent.runner exec use input or exec"},
		{minimal + "    agent:\n      warmup:\n        workflow: warmup.json\n", `fleets[0].agent.warmup.workflow: "warmup.json" must be an absolute path`},
		{minimal + "    agent:\n      warmup:\n        exec: /opt/warm\n        timeout: 10m\n", "fleets[0].agent.warmup.timeout: must be at least 1s and shorter than boot_timeout (10m0s)"},
		{minimal + "    boot_timeout: 3m\n    agent:\n      warmup:\n        exec: /opt/warm\n", "shorter than boot_timeout (3m0s), which includes the warm-up; got 5m0s"},
		{minimal + "    agent:\n      warmup:\n        timeout: 1m\n", "fleets[0].agent.warmup.timeout: is set without a warm-up"},
		{minimal + "    agent:\n      warmup:\n        input: [1, 2]\n", "fleets[0].agent.warmup.input: must be a mapping of fields"},
	}
	for _, b := range bad {
		_, err := Parse("bad.yaml", []byte(b.doc))
		var verr *ValidationError
		if !errors.As(err, &verr) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("error %v\ndoes not contain %s", err, b.want)
		}
	}
}
