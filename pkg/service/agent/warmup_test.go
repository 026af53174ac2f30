package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// warmRunner is the sleep runner that records the jobs it is given: the
// warm-up's among them.
type warmRunner struct {
	agent.SleepRunner
	mu   sync.Mutex
	runs []string // job id: input
}

func (r *warmRunner) Run(ctx context.Context, j *agent.Job) (json.RawMessage, error) {
	r.mu.Lock()
	r.runs = append(r.runs, j.JobID+": "+string(j.Input))
	r.mu.Unlock()
	return r.SleepRunner.Run(ctx, j)
}

func (r *warmRunner) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.runs...)
}

// The warm-up runs on the runner once it is ready and before the worker
// registers: nothing is leased while it runs, the registration reports
// when it ended, and the first job runs after it.
func TestWarmUpRunsBeforeRegistration(t *testing.T) {
	t.Parallel()
	e := newStack(t, true)
	e.create("j1", `{"seconds": 0}`)
	r := &warmRunner{}
	e.start("warm", r, func(c *agent.Config) {
		c.Clock = e.clock
		c.Warmup = agent.Warmup{Input: json.RawMessage(`{"seconds": 40}`)}
	})
	testenv.Waiters(t, e.clock, 2) // the warm-up's sleep and its timeout
	e.clock.Advance(30 * time.Second)
	testenv.Waiters(t, e.clock, 2)
	if n := e.calls("/api/worker/register"); n != 0 {
		t.Fatalf("registered %d times during the warm-up", n)
	}
	if got := r.seen(); len(got) != 1 || got[0] != `warmup: {"seconds": 40}` {
		t.Fatalf("runs during the warm-up: %q", got)
	}
	e.clock.Advance(10 * time.Second)
	e.waitFor("j1 to succeed after the warm-up", func() bool { return e.job("j1").Status == job.Succeeded })
	w, err := e.stack.Store.GetWorker(e.ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if d := w.Boot.WarmedUpAt.Sub(w.Boot.RunnerReadyAt); d != 40*time.Second {
		t.Fatalf("boot %+v: the warm-up took %s, want 40s", w.Boot, d)
	}
	if w.RegisteredAt.Before(w.Boot.WarmedUpAt) {
		t.Fatalf("registered at %s before the warm-up ended at %s", w.RegisteredAt, w.Boot.WarmedUpAt)
	}
	if got := r.seen(); len(got) != 2 || !strings.HasPrefix(got[1], "j1: ") {
		t.Fatalf("runs %q: want the warm-up, then j1", got)
	}
}

// A warm-up that fails, or does not end within its timeout, makes the agent
// give up on the machine as a sick GPU does: the worker never leases a job
// and shows unhealthy (the scaler replaces the instance), and Run answers
// ErrUnhealthy with why.
func TestFailedWarmUpMarksTheMachineUnhealthy(t *testing.T) {
	t.Parallel()
	failing := filepath.Join(t.TempDir(), "warm.sh")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'loading model.safetensors'\necho 'CUDA out of memory' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		warmup  agent.Warmup
		advance time.Duration
		want    string
	}{
		{"the runner fails it", agent.Warmup{Input: json.RawMessage(`{"seconds": 1, "fail": "model file missing"}`)}, time.Second, "warm-up failed: model file missing"},
		{"it times out", agent.Warmup{Input: json.RawMessage(`{"seconds": 600}`), Timeout: time.Minute}, time.Minute, "warm-up did not finish within 1m0s"},
		{"its command exits 1", agent.Warmup{Exec: failing}, 0, "warm-up failed: exit status 1: loading model.safetensors\nCUDA out of memory"},
		{"its workflow is not on the machine", agent.Warmup{Workflow: "/nonexistent/warmup.json"}, 0, "warm-up failed: read the warm-up workflow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newStack(t, true)
			e.create("j1", `{"seconds": 0}`)
			a := e.start("cold", agent.SleepRunner{}, func(c2 *agent.Config) { c2.Clock, c2.Warmup = e.clock, c.warmup })
			if c.advance > 0 {
				testenv.Waiters(t, e.clock, 2) // the warm-up's sleep and its timeout
				e.clock.Advance(c.advance)
			}
			err := a.wait(t)
			if !errors.Is(err, agent.ErrUnhealthy) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("agent: %v, want ErrUnhealthy with %q", err, c.want)
			}
			if n := e.calls("/api/worker/poll"); n != 0 {
				t.Fatalf("a machine that did not warm up polled %d times", n)
			}
			if j := e.job("j1"); j.Status != job.Queued {
				t.Fatalf("j1 is %s", j.Status)
			}
			if w, err := e.stack.Store.GetWorker(e.ctx, "cold"); err != nil || w.Status != worker.Unhealthy || !w.Boot.WarmedUpAt.IsZero() {
				t.Fatalf("the worker: %+v, %v; want unhealthy, never warmed up", w, err)
			}
		})
	}
}

// A warm-up is one of a workflow, an input or a command, and an input is
// a JSON object.
func TestNewRefusesABadWarmUp(t *testing.T) {
	t.Parallel()
	base := agent.Config{API: "http://x", FleetSecret: "s", Fleet: "f", Stage: "s", WorkerID: "w", Runner: agent.SleepRunner{},
		Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)}
	for _, w := range []agent.Warmup{
		{Exec: "true", Input: json.RawMessage(`{}`)},
		{Input: json.RawMessage(`[1]`)},
		{Input: json.RawMessage(`{"seconds": `)},
		{Exec: "true", Timeout: -time.Second},
	} {
		c := base
		c.Warmup = w
		if _, err := agent.New(c); err == nil {
			t.Errorf("warm-up %+v accepted", w)
		}
	}
}

// A fleet's warm-up workflow (a file in ComfyUI's API format on the
// machine) is queued once on every ComfyUI server of the machine before the
// worker registers: each GPU loads the models.
func TestWarmUpWorkflowRunsOnEveryComfyUIServer(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	gpu0, srv0 := newComfyServer(t)
	gpu1, srv1 := newComfyServer(t)
	var prompt map[string]json.RawMessage
	if err := json.Unmarshal(comfyWorkflow("sdxl.safetensors", "", 1), &prompt); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(t.TempDir(), "warmup.json")
	if err := os.WriteFile(wf, prompt["prompt"], 0o644); err != nil {
		t.Fatal(err)
	}
	pool := agent.NewComfyUIPool(agent.ComfyUIRunner{PollEvery: 10 * time.Millisecond}, []string{srv0.URL, srv1.URL})
	e.start("comfy", pool, func(c *agent.Config) { c.MaxConcurrency, c.Warmup = 2, agent.Warmup{Workflow: wf} })
	e.waitFor("the registration", func() bool { return e.calls("/api/worker/register") == 1 })
	for i, c := range []*comfyServer{gpu0, gpu1} {
		if n, _, _, _, _ := c.snapshot(); n != 1 {
			t.Fatalf("ComfyUI server %d got %d warm-up prompts before the registration, want 1", i, n)
		}
	}
	w, err := e.stack.Store.GetWorker(e.ctx, "comfy")
	if err != nil || w.Boot.WarmedUpAt.IsZero() || w.Boot.WarmedUpAt.Before(w.Boot.RunnerReadyAt) {
		t.Fatalf("boot %+v, %v", w.Boot, err)
	}
}

// An API of the previous release refuses the boot fields it does not know:
// the agent registers again without them instead of giving up.
func TestRegistersWithAnAPIThatDoesNotKnowTheWarmUp(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/api/worker/register" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		mu.Lock()
		bodies = append(bodies, string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), `"warmed_up_at"`) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"code":"invalid_argument","message":"invalid body: json: unknown field \"warmed_up_at\""}}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"worker_id":"old","token":"t","workflows_assigned":["w"],"lease_seconds":60,"heartbeat_seconds":10,"poll_seconds":1,"approved":true}`))
	}))
	defer srv.Close()
	a, err := agent.New(agent.Config{API: srv.URL, FleetSecret: "s", Fleet: "gpu", Stage: "test", WorkerID: "old", Runner: agent.SleepRunner{},
		Warmup: agent.Warmup{Input: json.RawMessage(`{"seconds": 0}`)}, Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	testenv.Eventually(t, "a registration without the warm-up's end", testenv.Ticks(t, 10*time.Millisecond), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) == 2
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("agent: %v", err)
	}
	if !strings.Contains(bodies[0], `"warmed_up_at"`) || strings.Contains(bodies[1], `"warmed_up_at"`) || !strings.Contains(bodies[1], `"runner_ready_at"`) {
		t.Fatalf("registrations %q", bodies)
	}
}
