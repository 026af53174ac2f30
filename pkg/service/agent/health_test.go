package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// nvidia-smi's answers to --query-gpu=index,name,uuid,pci.bus_id,
// driver_version,memory.total,ecc.errors.uncorrected.volatile.total,
// clocks_throttle_reasons.hw_slowdown --format=csv,noheader,nounits, in
// the format NVIDIA's nvidia-smi documentation gives: one line per GPU,
// values joined by ", ", no units, "[N/A]" for a field the GPU lacks.
const (
	smiHealthy = "0, NVIDIA A10G, GPU-3b1d5b1e-8a5c-2f0e-9c4d-1f2a3b4c5d6e, 00000000:00:1E.0, 550.127.05, 23028, 0, Not Active\n"
	smiTwo     = "0, NVIDIA L4, GPU-0a9e2c41-77d2-4c1b-b1d6-5e0f3c2a1b90, 00000000:38:00.0, 550.127.05, 23034, 0, Not Active\n" +
		"1, NVIDIA L4, GPU-6f3d8a12-0c4e-4b7a-9e21-8d5c7b6a4f13, 00000000:3A:00.0, 550.127.05, 23034, [N/A], Not Active\n"
	smiECC    = "0, NVIDIA A10G, GPU-3b1d5b1e-8a5c-2f0e-9c4d-1f2a3b4c5d6e, 00000000:00:1E.0, 550.127.05, 23028, 4, Not Active\n"
	smiLost   = "0, [GPU is lost], [GPU is lost], 00000000:00:1E.0, 550.127.05, [GPU is lost], [GPU is lost], [GPU is lost]\n"
	smiNoComm = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"
)

// fakeSMI puts an nvidia-smi on PATH that prints what set last gave it
// and exits with its code, and records its arguments.
type fakeSMI struct{ dir string }

func newFakeSMI(t *testing.T, out string, code int) *fakeSMI {
	dir := t.TempDir()
	f := &fakeSMI{dir: dir}
	script := "#!/bin/sh\necho \"$@\" > " + dir + "/args\ncat " + dir + "/out\nexit $(cat " + dir + "/code)\n"
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f.set(t, out, code)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return f
}

func (f *fakeSMI) set(t *testing.T, out string, code int) {
	// Written whole, then renamed, so a running script never reads half.
	for name, data := range map[string]string{"out": out, "code": strconv.Itoa(code)} {
		tmp := filepath.Join(f.dir, name+".tmp")
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(f.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNvidiaSMIQuery(t *testing.T) {
	smi := newFakeSMI(t, smiTwo, 0)
	gpus, err := agent.NvidiaSMI{}.Query(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(filepath.Join(smi.dir, "args"))
	if !strings.Contains(string(args), "--format=csv,noheader,nounits") || !strings.Contains(string(args), "ecc.errors.uncorrected.volatile.total") {
		t.Fatalf("args %s", args)
	}
	if len(gpus) != 2 || gpus[1].Index != 1 || gpus[1].Name != "NVIDIA L4" || gpus[1].MemoryMiB != 23034 || gpus[1].Driver != "550.127.05" ||
		gpus[1].ECCUncorrected != nil || gpus[0].ECCUncorrected == nil || *gpus[0].ECCUncorrected != 0 {
		t.Fatalf("gpus %+v", gpus)
	}
	smi.set(t, smiLost, 0)
	if gpus, err := (agent.NvidiaSMI{}).Query(context.Background()); err != nil || gpus[0].Lost != "GPU is lost" {
		t.Fatalf("lost: %+v %v", gpus, err)
	}
	smi.set(t, smiNoComm, 9)
	if _, err := (agent.NvidiaSMI{}).Query(context.Background()); err == nil || !strings.Contains(err.Error(), "couldn't communicate") {
		t.Fatalf("driver failure: %v", err)
	}
	if _, err := (agent.NvidiaSMI{Path: filepath.Join(t.TempDir(), "nvidia-smi")}).Query(context.Background()); !errors.Is(err, agent.ErrNoNvidiaSMI) {
		t.Fatalf("absent: %v", err)
	}
}

// A GPU that turns sick mid-job: the agent stops leasing, requeues the job
// without spending an attempt, deregisters and answers ErrUnhealthy.
func TestSickGPUDrainsTheWorker(t *testing.T) {
	for _, sick := range []struct {
		name string
		out  string
		code int
	}{{"uncorrectable ECC", smiECC, 0}, {"GPU lost", smiLost, 0}, {"driver gone", smiNoComm, 9}, {"fell off the bus", "", 0}} {
		t.Run(sick.name, func(t *testing.T) {
			e := newStack(t, false)
			smi := newFakeSMI(t, smiHealthy, 0)
			e.create("j1", `{"seconds": 30}`)
			a := e.start("g1", agent.SleepRunner{}, func(c *agent.Config) { c.GPU, c.HealthEvery = &agent.NvidiaSMI{}, 20*time.Millisecond })
			e.waitFor("j1 leased", func() bool { return e.job("j1").Status == job.Leased })
			w, err := e.stack.Store.GetWorker(e.ctx, "g1")
			if err != nil || !strings.Contains(string(w.Capabilities), `"name":"NVIDIA A10G"`) || !strings.Contains(string(w.Capabilities), `"memory_mib":23028`) {
				t.Fatalf("registered capabilities %s, %v", w.Capabilities, err)
			}
			smi.set(t, sick.out, sick.code)
			if err := a.wait(t); !errors.Is(err, agent.ErrUnhealthy) {
				t.Fatalf("agent: %v", err)
			}
			j := e.job("j1")
			if j.Status != job.Queued || j.Attempts != 0 || j.Preemptions != 1 {
				t.Fatalf("after the GPU turned sick: %s attempts %d preemptions %d", j.Status, j.Attempts, j.Preemptions)
			}
			// Still registered, as unhealthy: it takes no work and the
			// scaler replaces its instance once idle.
			if w, err := e.stack.Store.GetWorker(e.ctx, "g1"); err != nil || w.Status != worker.Unhealthy {
				t.Fatalf("the sick worker: %+v, %v", w, err)
			}
		})
	}
	// Sick at start: the agent never registers.
	e := newStack(t, false)
	newFakeSMI(t, smiECC, 0)
	a := e.start("g2", agent.SleepRunner{}, func(c *agent.Config) { c.GPU = &agent.NvidiaSMI{} })
	if err := a.wait(t); !errors.Is(err, agent.ErrUnhealthy) || !strings.Contains(err.Error(), "4 uncorrectable ECC errors") {
		t.Fatalf("agent: %v", err)
	}
	if n := e.calls("/api/worker/register"); n != 0 {
		t.Fatalf("a sick machine registered (%d calls)", n)
	}
}

// flakyRunner is a sleep runner whose readiness the test switches.
type flakyRunner struct {
	agent.SleepRunner
	down atomic.Bool
	asks atomic.Int32
}

func (f *flakyRunner) Ready(context.Context) error {
	f.asks.Add(1)
	if f.down.Load() {
		return errors.New("connection refused")
	}
	return nil
}

// The runner is asked before every lease: while it is down no job is
// leased, and down past UnhealthyAfter the agent gives up.
func TestReadinessBeforeEveryLease(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	r := &flakyRunner{}
	a := e.start("r1", r, func(c *agent.Config) { c.ReadyPoll, c.UnhealthyAfter = 20*time.Millisecond, 300*time.Millisecond })
	e.waitFor("a poll", func() bool { return e.calls("/api/worker/poll") >= 1 })
	r.down.Store(true)
	polls := e.calls("/api/worker/poll")
	e.create("j1", `{"seconds": 0}`)
	if err := a.wait(t); !errors.Is(err, agent.ErrUnhealthy) || !strings.Contains(err.Error(), "runner not ready") {
		t.Fatalf("agent: %v", err)
	}
	if j := e.job("j1"); j.Status != job.Queued || j.Attempts != 0 {
		t.Fatalf("j1 %s attempts %d", j.Status, j.Attempts)
	}
	if n := e.calls("/api/worker/poll"); n > polls+1 {
		t.Fatalf("%d polls while the runner was down", n-polls)
	}
}

// The header of plain `nvidia-smi` (driver 550), in the layout NVIDIA's
// nvidia-smi prints: the CUDA version is only there, not in --query-gpu.
const smiBanner = `Mon Mar  2 09:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.127.05             Driver Version: 550.127.05     CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA A10G                    On  |   00000000:00:1E.0 Off |                    0 |
|  0%   27C    P8              9W /  300W |       1MiB /  23028MiB |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
`

// bannerSMI is an nvidia-smi that prints banner without arguments and csv
// with them.
func bannerSMI(t *testing.T, banner, csv string) string {
	dir := t.TempDir()
	for name, data := range map[string]string{"banner": banner, "csv": csv} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "nvidia-smi")
	script := "#!/bin/sh\nif [ $# -eq 0 ]; then cat " + dir + "/banner; else cat " + dir + "/csv; fi\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCUDAVersionFromTheHeader(t *testing.T) {
	t.Parallel()
	v, err := agent.NvidiaSMI{Path: bannerSMI(t, smiBanner, smiHealthy)}.CUDAVersion(context.Background())
	if err != nil || v != "12.4" {
		t.Fatalf("CUDA version %q, %v", v, err)
	}
	// A driver too old to print it: no version, no error.
	old := strings.Replace(smiBanner, "     CUDA Version: 12.4     ", "                            ", 1)
	if v, err := (agent.NvidiaSMI{Path: bannerSMI(t, old, smiHealthy)}).CUDAVersion(context.Background()); err != nil || v != "" {
		t.Fatalf("old driver: %q, %v", v, err)
	}
	// Registered with the GPUs.
	e := newStack(t, false)
	e.start("c1", agent.SleepRunner{}, func(c *agent.Config) { c.GPU = &agent.NvidiaSMI{Path: bannerSMI(t, smiBanner, smiTwo)} })
	var w worker.Worker
	e.waitFor("c1 registered", func() bool {
		var err error
		w, err = e.stack.Store.GetWorker(e.ctx, "c1")
		return err == nil
	})
	if !strings.Contains(string(w.Capabilities), `"cuda_version":"12.4"`) || !strings.Contains(string(w.Capabilities), `"name":"NVIDIA L4"`) {
		t.Fatalf("capabilities %s", w.Capabilities)
	}
}

// A worker whose exec command is not on the machine never registers: the
// agent keeps asking its runner and says why, and registers once the
// program appears (an image fixed in place, or a slow mount).
func TestMissingExecProgramNeverRegisters(t *testing.T) {
	t.Parallel()
	e := newStack(t, true)
	prog := filepath.Join(t.TempDir(), "run-scene")
	e.start("m1", agent.ExecRunner{Command: prog}, func(c *agent.Config) { c.Clock = e.clock })
	for range 3 {
		e.waitFor("the agent to say its runner is not ready", func() bool { return e.logged("runner not ready") })
		testenv.Waiters(t, e.clock, 1)
		e.clock.Advance(time.Minute)
	}
	if n := e.calls("/api/worker/register"); n != 0 {
		t.Fatalf("%d registrations with the runner missing", n)
	}
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.Waiters(t, e.clock, 1)
	e.clock.Advance(time.Minute)
	e.waitFor("a registration", func() bool { return e.calls("/api/worker/register") == 1 })
}
