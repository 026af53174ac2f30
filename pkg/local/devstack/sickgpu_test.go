package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// nvidia-smi's answer to the agent's --query-gpu=... --format=csv,noheader,nounits
// in the documented format (one line per GPU, ", " between values, no
// units): healthy, then with uncorrectable volatile ECC errors.
const (
	smiHealthy = "0, NVIDIA A10G, GPU-3b1d5b1e-8a5c-2f0e-9c4d-1f2a3b4c5d6e, 00000000:00:1E.0, 550.127.05, 23028, 0, Not Active\n"
	smiECC     = "0, NVIDIA A10G, GPU-3b1d5b1e-8a5c-2f0e-9c4d-1f2a3b4c5d6e, 00000000:00:1E.0, 550.127.05, 23028, 2, Not Active\n"
)

// fakeSMI writes an nvidia-smi that prints the file next to it, so the
// test can turn the GPU sick while the agent runs.
func fakeSMI(t *testing.T, out string) (path string, set func(string)) {
	dir := t.TempDir()
	path = filepath.Join(dir, "nvidia-smi")
	// Plain nvidia-smi prints its header (with the CUDA version); with
	// arguments, the query's CSV.
	banner := "| NVIDIA-SMI 550.127.05             Driver Version: 550.127.05     CUDA Version: 12.4     |\n"
	script := "#!/bin/sh\nif [ $# -eq 0 ]; then printf '%s' '" + banner + "'; else cat " + filepath.Join(dir, "out") + "; fi\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	set = func(out string) {
		tmp := filepath.Join(dir, "out.tmp")
		if err := os.WriteFile(tmp, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "out")); err != nil {
			t.Fatal(err)
		}
	}
	set(out)
	return path, set
}

// A GPU that turns sick on a local instance while it runs a job: its worker
// stops leasing, gives the job back without spending an attempt and shows
// as unhealthy; the scaler terminates the instance, and the replacement
// registers and finishes the job.
func TestSickGPUInstanceIsReplaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	firstSMI, sicken := fakeSMI(t, smiHealthy)
	otherSMI, _ := fakeSMI(t, smiHealthy)
	var mu sync.Mutex
	var first string // the first instance: its GPU turns sick
	const healthEvery = 15 * time.Second
	stack, requests := startWatched(t, fleetconfig.Default(), clk, devstack.FleetOptions{BootDelay: 10 * time.Second, LocalAgents: true,
		AgentConfig: func(_, instanceID string, c *agent.Config) {
			mu.Lock()
			defer mu.Unlock()
			path := otherSMI
			if first == "" || first == instanceID {
				first, path = instanceID, firstSMI
			}
			c.GPU, c.HealthEvery = &agent.NvidiaSMI{Path: path}, healthEvery
		}})
	firstInstance := func() string { mu.Lock(); defer mu.Unlock(); return first }

	const id = "t1:sick-gpu-1"
	submit(t, stack, map[string]any{"job_id": id, "tenant_id": "t1", "workflow_id": "demo-sleep", "input": map[string]any{"seconds": 60}})
	getJob := func() job.Job {
		j, err := stack.Store.GetJob(ctx, id)
		if err != nil {
			return job.Job{}
		}
		return j
	}
	testenv.Eventually(t, "the job dispatched", stack.Dispatched(), func() bool { return getJob().Status == job.Queued })

	// The scaler launches an instance; it boots and its agent leases the job.
	if _, err := stack.Scaler.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	stack.Fleet.Step(ctx, 0)
	testenv.Eventually(t, "the job leased", requests, func() bool { return getJob().Status == job.Leased })
	sick := firstInstance()
	if j := getJob(); j.WorkerID != sick || j.Attempts != 1 {
		t.Fatalf("leased by %q (first instance %q), attempts %d", j.WorkerID, sick, j.Attempts)
	}

	// Its GPU logs uncorrectable ECC errors: the next health check, once
	// the agent waits for it with its job running, drains the worker.
	testenv.Waiters(t, clk, fleetWaits+pollWaits+jobWaits+healthWaits)
	sicken(smiECC)
	clk.Advance(healthEvery)
	testenv.Eventually(t, "the worker reported unhealthy", requests, func() bool {
		w, err := stack.Store.GetWorker(ctx, sick)
		return err == nil && w.Status == worker.Unhealthy
	})
	j := getJob()
	if j.Status != job.Queued || j.Attempts != 0 || j.Preemptions != 1 {
		t.Fatalf("the sick worker's job: %s, attempts %d, preemptions %d", j.Status, j.Attempts, j.Preemptions)
	}
	var view wire.WorkersResponse
	getJSON(t, stack, "/api/admin/workers?fleet=demo", &view)
	if len(view.Workers) != 1 || view.Workers[0].WorkerID != sick || view.Workers[0].Status != "unhealthy" || view.Workers[0].Leases != 0 {
		t.Fatalf("workers view %+v", view.Workers)
	}
	if caps := string(view.Workers[0].Capabilities); !strings.Contains(caps, `"cuda_version":"12.4"`) || !strings.Contains(caps, `"name":"NVIDIA A10G"`) {
		t.Fatalf("the worker's GPU facts in the view: %s", caps)
	}

	// The next tick terminates the sick instance; the group launches a
	// replacement, whose agent registers and finishes the job.
	reports, err := stack.Scaler.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := reports[0]; len(r.Terminated) != 1 || r.Terminated[0] != sick || r.Desired != 1 {
		t.Fatalf("tick: terminated %v (sick %s), desired %d: %s", r.Terminated, sick, r.Desired, r.Decision.Reason)
	}
	clk.Advance(10 * time.Second)
	stack.Fleet.Step(ctx, 0)
	testenv.Eventually(t, "the replacement leased the job", requests, func() bool {
		j := getJob()
		return j.Status == job.Leased && j.WorkerID != sick
	})
	// Its 60 seconds of sleep, as long as the lease: its heartbeats keep
	// the lease while they pass.
	stepLeased(t, stack, clk, requests, "demo", time.Minute, func() int { return fleetWaits + pollWaits + jobWaits + healthWaits }, id)
	testenv.Eventually(t, "the job succeeded", requests, func() bool { return getJob().Status == job.Succeeded })
	if j := getJob(); j.Attempts != 1 || j.Preemptions != 1 {
		t.Fatalf("the finished job: attempts %d, preemptions %d", j.Attempts, j.Preemptions)
	}
	if s := stack.Fleet.Stats(); s.Launched != 2 || s.Terminated != 1 || s.KilledBusy != 0 {
		t.Fatalf("fleet stats %+v", s)
	}
}

func submit(t *testing.T, s *devstack.Stack, body map[string]any) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/api/jobs", bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+s.OperatorToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
		t.Fatalf("submit: %s", res.Status)
	}
}

func getJSON(t *testing.T, s *devstack.Stack, path string, into any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.OperatorToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}
