package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
)

// ErrUnhealthy is what Run answers when the agent gave up on its machine: a
// sick GPU, or a runner that stayed unready past Config.UnhealthyAfter. Its
// jobs were requeued (no attempt spent) and the worker deregistered; the
// machine should be replaced (fleetq worker exits 3).
var ErrUnhealthy = errors.New("the machine is unhealthy")

// health is the agent's view of its machine.
type health struct {
	mu        sync.Mutex
	gpus      []GPU     // as read at start
	cuda      string    // the driver's CUDA version, from nvidia-smi's header
	downSince time.Time // the runner has been unready since (zero: ready)
	reason    string    // why the agent gave up (empty: it has not)
}

// inspectGPUs reads the GPUs at start: their facts go into the worker's
// capabilities; a sick GPU fails at once. No nvidia-smi: no GPU facts and
// no GPU checks.
func (a *Agent) inspectGPUs(ctx context.Context) error {
	if a.cfg.GPU == nil {
		return nil
	}
	gpus, err := a.cfg.GPU.Query(ctx)
	switch {
	case errors.Is(err, ErrNoNvidiaSMI):
		a.log.Info("no nvidia-smi: no GPU facts and no GPU health checks")
		a.cfg.GPU = nil
		return nil
	case err != nil:
		return fmt.Errorf("%w: %v", ErrUnhealthy, err)
	}
	if p := gpuProblem(gpus, 0); p != "" {
		return fmt.Errorf("%w: %s", ErrUnhealthy, p)
	}
	if p := a.xidProblem(ctx); p != "" {
		return fmt.Errorf("%w: %s", ErrUnhealthy, p)
	}
	cuda, err := a.cfg.GPU.CUDAVersion(ctx)
	if err != nil {
		a.log.Warn("no CUDA version from nvidia-smi's header", "error", err.Error())
	}
	a.health.mu.Lock()
	a.health.gpus, a.health.cuda = gpus, cuda
	a.health.mu.Unlock()
	a.log.Info("GPUs", "count", len(gpus), "gpus", gpus, "cuda_version", cuda)
	return nil
}

// xidProblem reads the kernel log for fatal Xid events (empty: none, or
// no log configured). A log that cannot be read is not a sick GPU: it is
// logged, and asked again at the next check.
func (a *Agent) xidProblem(ctx context.Context) string {
	if a.cfg.Xid == nil {
		return ""
	}
	p, err := a.cfg.Xid.Check(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("cannot read the kernel log for Xid errors", "error", err.Error())
		}
		return ""
	}
	return p
}

// capabilities are the worker's registered facts: its GPUs and the
// driver's CUDA version.
func (a *Agent) capabilities() json.RawMessage {
	a.health.mu.Lock()
	defer a.health.mu.Unlock()
	if a.health.gpus == nil {
		return nil
	}
	caps := map[string]any{"gpus": a.health.gpus}
	if a.health.cuda != "" {
		caps["cuda_version"] = a.health.cuda
	}
	raw, _ := json.Marshal(caps)
	return raw
}

// readyToLease asks the runner before a lease; an unready runner waits
// ReadyPoll (and, unready for UnhealthyAfter, makes the agent give up).
func (a *Agent) readyToLease(ctx context.Context) bool {
	if a.unhealthyReason() != "" {
		a.wait(ctx, nil, a.cfg.ReadyPoll) // the stop is on its way
		return false
	}
	err := a.cfg.Runner.Ready(ctx)
	a.noteReady(err)
	if err == nil {
		return true
	}
	if ctx.Err() == nil {
		a.log.Warn("runner not ready; not leasing", "error", err.Error())
	}
	a.wait(ctx, nil, a.cfg.ReadyPoll)
	return false
}

// noteReady records a readiness answer.
func (a *Agent) noteReady(err error) {
	a.health.mu.Lock()
	if err == nil {
		a.health.downSince = time.Time{}
		a.health.mu.Unlock()
		return
	}
	now := a.cfg.Clock.Now()
	if a.health.downSince.IsZero() {
		a.health.downSince = now
	}
	down := now.Sub(a.health.downSince)
	a.health.mu.Unlock()
	if down >= a.cfg.UnhealthyAfter {
		a.giveUp(fmt.Sprintf("runner not ready for %s: %v", down.Round(time.Second), err))
	}
}

// watchHealth checks the GPUs and the runner every HealthEvery while the
// agent runs, whether or not its slots are busy.
func (a *Agent) watchHealth(ctx context.Context) {
	t := a.cfg.Clock.NewTicker(a.cfg.HealthEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		if gpu := a.cfg.GPU; gpu != nil {
			a.health.mu.Lock()
			want := len(a.health.gpus)
			a.health.mu.Unlock()
			gpus, err := gpu.Query(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				a.giveUp(err.Error())
				return
			}
			if p := gpuProblem(gpus, want); p != "" {
				a.giveUp(p)
				return
			}
			if p := a.xidProblem(ctx); p != "" {
				a.giveUp(p)
				return
			}
		}
		a.noteReady(a.cfg.Runner.Ready(ctx))
	}
}

// giveUp makes the agent stop leasing and shut down: running jobs are
// requeued at once (they would fail on this machine), the worker
// deregisters and Run answers ErrUnhealthy.
func (a *Agent) giveUp(reason string) {
	a.health.mu.Lock()
	first := a.health.reason == ""
	if first {
		a.health.reason = reason
	}
	a.health.mu.Unlock()
	if !first {
		return
	}
	a.leasing.Store(false)
	a.log.Error("machine unhealthy; stopping leasing and giving back running jobs", "reason", reason)
	a.signal(job.Shutdown)
}

func (a *Agent) unhealthyReason() string {
	a.health.mu.Lock()
	defer a.health.mu.Unlock()
	return a.health.reason
}

// unhealthyErr is what Run answers after a shutdown.
func (a *Agent) unhealthyErr() error {
	if r := a.unhealthyReason(); r != "" {
		return fmt.Errorf("%w: %s", ErrUnhealthy, r)
	}
	return nil
}

// reportUnhealthy tells the API the machine is sick, so the worker takes no
// work and the scaler replaces its instance; an API without the route gets
// a deregistration instead.
func (a *Agent) reportUnhealthy(ctx context.Context) {
	err := a.client.Unhealthy(ctx, a.unhealthyReason())
	if err == nil {
		a.log.Info("reported unhealthy; the instance will be replaced")
		return
	}
	a.log.Warn("reporting unhealthy failed; deregistering", "error", err.Error())
	if err := a.client.Deregister(ctx); err != nil {
		a.log.Warn("deregister failed", "error", err.Error())
	}
}
