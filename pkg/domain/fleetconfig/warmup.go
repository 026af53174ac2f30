package fleetconfig

import (
	"encoding/json"
	"path"
	"time"
)

// Warmup is a job the agent runs once its runner is ready and before it
// registers, so the fleet's first real job does not pay for loading the
// models (docs/worker.md, "Warm-up"). Set one of Workflow, Input and Exec.
type Warmup struct {
	// Workflow is the path on the instance of a workflow in ComfyUI's API
	// format (baked into the image) that loads the fleet's models; the
	// comfyui runner runs it once on every ComfyUI server of the instance.
	Workflow string `yaml:"workflow"`
	// Input is a job input the fleet's runner runs as the warm-up (exec:
	// on the command's stdin; comfyui: {prompt: {...}}; sleep: {seconds: N}).
	Input map[string]any `yaml:"input"`
	// Exec is a command the agent runs with /bin/sh -c instead, whatever
	// the runner; exit 0 means warm.
	Exec string `yaml:"exec"`
	// Timeout bounds the warm-up (default 5m); it must be shorter than
	// boot_timeout, which counts from launch to registration and so
	// includes the warm-up.
	Timeout Duration `yaml:"timeout"`
}

// DefaultWarmupTimeout bounds a warm-up left without a timeout.
const DefaultWarmupTimeout = 5 * time.Minute

// Enabled reports whether the fleet warms its runners up.
func (w Warmup) Enabled() bool { return w.Workflow != "" || len(w.Input) > 0 || w.Exec != "" }

// InputJSON is Input as the job input the runner gets (nil without one).
func (w Warmup) InputJSON() json.RawMessage {
	if len(w.Input) == 0 {
		return nil
	}
	b, err := json.Marshal(w.Input)
	if err != nil {
		return nil // validate refuses such an input
	}
	return b
}

func (w *Warmup) applyDefaults() {
	if w.Enabled() && w.Timeout == 0 {
		w.Timeout = Duration(DefaultWarmupTimeout)
	}
}

func (f *Fleet) validateWarmup(at string, k *checker) {
	w := f.Agent.Warmup
	at += ".agent.warmup"
	n := 0
	for _, set := range []bool{w.Workflow != "", len(w.Input) > 0, w.Exec != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		k.add(at, "set one of workflow, input and exec")
	}
	if w.Workflow != "" {
		if f.Agent.Runner != "comfyui" {
			k.add(at+".workflow", "is run by the comfyui runner; with agent.runner %s use input or exec", f.Agent.Runner)
		}
		if !path.IsAbs(w.Workflow) {
			k.add(at+".workflow", "%q must be an absolute path on the instance", w.Workflow)
		}
	}
	if len(w.Input) > 0 {
		if _, err := json.Marshal(w.Input); err != nil {
			k.add(at+".input", "must be a JSON object: %v", err)
		}
	}
	if !w.Enabled() {
		if w.Timeout != 0 {
			k.add(at+".timeout", "is set without a warm-up (workflow, input or exec)")
		}
		return
	}
	if w.Timeout.Std() < time.Second || w.Timeout.Std() >= f.BootTimeout.Std() {
		k.add(at+".timeout", "must be at least 1s and shorter than boot_timeout (%s), which includes the warm-up; got %s", f.BootTimeout, w.Timeout)
	}
}
