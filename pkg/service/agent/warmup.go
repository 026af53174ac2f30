package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Warmup is a job the agent runs once its runner is ready and before it
// registers, so that the first real job does not pay for loading the
// fleet's models (docs/worker.md, "Warm-up"). Exactly one of Workflow,
// Input and Exec is set; none: no warm-up.
type Warmup struct {
	// Workflow is the path of a workflow in ComfyUI's API format on this
	// machine, run by the comfyui runner as a job whose input.prompt it is
	// (on every server of a pool).
	Workflow string
	// Input is a job input the runner runs (exec: on the command's stdin;
	// comfyui: {"prompt": {...}}; sleep: {"seconds": N}).
	Input json.RawMessage
	// Exec is a command run with /bin/sh -c instead of a job: it gets the
	// agent's environment (it is the operator's, as the health command is)
	// and exit 0 means warm.
	Exec string
	// Timeout bounds the warm-up (default DefaultWarmupTimeout).
	Timeout time.Duration
}

// DefaultWarmupTimeout bounds a warm-up without a Timeout.
const DefaultWarmupTimeout = 5 * time.Minute

// set reports whether there is a warm-up to run.
func (w Warmup) set() bool { return w.Workflow != "" || len(w.Input) > 0 || w.Exec != "" }

// check says what is wrong with the warm-up's settings, or nil.
func (w Warmup) check() error {
	n := 0
	for _, s := range []bool{w.Workflow != "", len(w.Input) > 0, w.Exec != ""} {
		if s {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("agent: a warm-up is one of a workflow, an input or a command")
	case len(w.Input) > 0 && (!json.Valid(w.Input) || bytes.TrimSpace(w.Input)[0] != '{'):
		return errors.New("agent: the warm-up input must be a JSON object")
	case w.Timeout < 0:
		return errors.New("agent: the warm-up timeout must not be negative")
	}
	return nil
}

// warmupJobID names the warm-up's job in the runner's log and in
// ComfyUI's prompt ids.
const warmupJobID = "warmup"

// warmUp runs the warm-up (when there is one) within its timeout, on the
// agent's clock. It answers why it failed, or nil.
func (a *Agent) warmUp(ctx context.Context) error {
	w := a.cfg.Warmup
	if !w.set() {
		return nil
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultWarmupTimeout
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := a.cfg.Clock.NewTimer(timeout)
	defer timer.Stop()
	timedOut := make(chan struct{})
	go func() {
		select {
		case <-timer.Chan():
			close(timedOut)
			cancel()
		case <-ctx.Done():
		}
	}()
	a.log.Info("warming up the runner", "timeout", timeout.String())
	start := a.cfg.Clock.Now()
	err := a.runWarmup(ctx, w)
	select {
	case <-timedOut:
		return fmt.Errorf("warm-up did not finish within %s", timeout)
	default:
	}
	if err != nil {
		return fmt.Errorf("warm-up failed: %w", err)
	}
	a.log.Info("warmed up", "took", a.cfg.Clock.Now().Sub(start).String())
	return nil
}

// runWarmup runs the warm-up's command, or its job on the runner (on each
// server of a ComfyUI pool: every GPU loads the models).
func (a *Agent) runWarmup(ctx context.Context, w Warmup) error {
	if w.Exec != "" {
		return a.runWarmupCommand(ctx, w.Exec)
	}
	input := w.Input
	if w.Workflow != "" {
		prompt, err := os.ReadFile(w.Workflow)
		if err != nil {
			return fmt.Errorf("read the warm-up workflow: %w", err)
		}
		if !json.Valid(prompt) || bytes.TrimSpace(prompt)[0] != '{' {
			return fmt.Errorf("the warm-up workflow %s is not a JSON object (ComfyUI's API format)", w.Workflow)
		}
		input, _ = json.Marshal(map[string]json.RawMessage{"prompt": prompt})
	}
	runners := []Runner{a.cfg.Runner}
	if pool, ok := a.cfg.Runner.(*ComfyUIPool); ok {
		runners = runners[:0]
		for _, r := range pool.Runners {
			runners = append(runners, r)
		}
	}
	errs := make([]error, len(runners))
	var wg sync.WaitGroup
	for i, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log := newTail(4096)
			j := &Job{Lease: Lease{JobID: warmupJobID, WorkflowID: warmupJobID, Attempt: 1, Input: input},
				HTTP: a.cfg.HTTP, Clock: a.cfg.Clock, Progress: func(float64) {}, Log: log}
			if _, err := r.Run(ctx, j); err != nil {
				errs[i] = err
				if t := tailOf(log.Bytes(), 1024); t != "" && !strings.Contains(err.Error(), t) {
					errs[i] = fmt.Errorf("%w (output: %s)", err, t)
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runWarmupCommand runs the warm-up command in its own process group, so
// a timeout ends the whole tree.
func (a *Agent) runWarmupCommand(ctx context.Context, command string) error {
	cmd := exec.Command("/bin/sh", "-c", command)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %q: %w", command, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return ctx.Err()
	}
	if err != nil {
		msg := err.Error()
		if t := tailOf(out.Bytes(), 1024); t != "" {
			msg += ": " + t
		}
		return errors.New(msg)
	}
	return nil
}

// failedWarmup marks the machine unhealthy after a failed warm-up, as a
// GPU turning sick does: it registers (it leases nothing: it never polls)
// only to report the machine unhealthy, so the scaler replaces the
// instance at its next tick instead of after the boot timeout, and the
// workers listing says so. It answers ErrUnhealthy.
func (a *Agent) failedWarmup(ctx context.Context, err error) error {
	reason := err.Error()
	a.log.Error("machine unhealthy: its runner did not warm up", "reason", reason)
	a.health.mu.Lock()
	a.health.reason = reason
	a.health.mu.Unlock()
	a.leasing.Store(false)
	if err := a.waitInService(ctx); err != nil {
		return fmt.Errorf("%w: %s", ErrUnhealthy, reason)
	}
	if err := a.register(ctx); err != nil {
		a.log.Warn("could not register to report the failed warm-up", "error", err.Error())
		return fmt.Errorf("%w: %s", ErrUnhealthy, reason)
	}
	a.reportUnhealthy(ctx)
	return fmt.Errorf("%w: %s", ErrUnhealthy, reason)
}
