package scaler_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// registerBooted registers a worker of the gpu fleet with the boot its
// agent reported.
func (h *harness) registerBooted(id string, boot worker.Boot) {
	h.t.Helper()
	if _, err := h.sys.Store.RegisterWorker(h.ctx, worker.Registration{WorkerID: id, Fleet: "gpu", Stage: "test", MaxConcurrency: 1,
		TokenHash: "hash-" + id, Boot: boot}); err != nil {
		h.t.Fatal(err)
	}
}

// Each tick publishes the fleet's boot phases over the workers registered
// in the last hour, one EMF line per phase (dimension Phase) before the
// fleet's own line: a bridge's start from the pool is its own phase, so
// is a start from the fleet's Spot pool, and a worker registered earlier
// than the window is left out.
func TestTickPublishesBootPhases(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	register := h.registerBooted
	now := h.clock.Now()
	// Registered two hours ago: out of the window.
	register("old", worker.Boot{LaunchedAt: now.Add(-20 * time.Minute), AgentStartedAt: now})
	h.advance(2 * time.Hour)
	now = h.clock.Now()
	register("spot-1", worker.Boot{LaunchedAt: now.Add(-200 * time.Second), AgentStartedAt: now.Add(-100 * time.Second), RunnerReadyAt: now.Add(-40 * time.Second)})
	register("spot-2", worker.Boot{LaunchedAt: now.Add(-300 * time.Second), AgentStartedAt: now.Add(-100 * time.Second), RunnerReadyAt: now.Add(-50 * time.Second)})
	register("bridge", worker.Boot{LaunchedAt: now.Add(-40 * time.Second), FromPool: true, AgentStartedAt: now.Add(-20 * time.Second), RunnerReadyAt: now.Add(-10 * time.Second)})
	register("pool", worker.Boot{LaunchedAt: now.Add(-130 * time.Second), SpotPool: true, AgentStartedAt: now.Add(-100 * time.Second), RunnerReadyAt: now.Add(-45 * time.Second)})
	h.metrics.Reset()
	h.tick()

	lines := strings.Split(strings.TrimSpace(h.metrics.String()), "\n")
	phases := map[string]map[string]any{}
	for i, line := range lines {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		phase, ok := doc["Phase"].(string)
		if !ok {
			if i != len(lines)-1 || doc["QueueDepth"] == nil {
				t.Fatalf("line %d is the fleet's, want it last: %s", i, line)
			}
			continue
		}
		dims := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Dimensions"]
		if b, _ := json.Marshal(dims); string(b) != `[["FleetSlug","Phase","Stage"]]` || doc["FleetSlug"] != "gpu" || doc["Stage"] != "test" {
			t.Fatalf("phase line %s", line)
		}
		phases[phase] = doc
	}
	want := map[string][4]float64{ // p50, p95, max, workers
		"launch_to_agent":            {100, 200, 200, 2},
		"pool_start_to_agent":        {20, 20, 20, 1},
		"spot_pool_start_to_agent":   {30, 30, 30, 1},
		"agent_to_runner_ready":      {50, 60, 60, 4},
		"runner_ready_to_registered": {40, 50, 50, 4},
	}
	if len(phases) != len(want) {
		t.Fatalf("phases %v, want %v", phases, want)
	}
	for name, w := range want {
		d := phases[name]
		if d == nil || d["BootPhaseP50Seconds"] != w[0] || d["BootPhaseP95Seconds"] != w[1] || d["BootPhaseMaxSeconds"] != w[2] || d["BootPhaseWorkers"] != w[3] {
			t.Errorf("phase %s: %v, want p50 %v p95 %v max %v over %v workers", name, d, w[0], w[1], w[2], w[3])
		}
	}
}

// The tick keeps the fleet's latest boots, launch to registration, of the
// workers registered since the tick before: a bridge's start from the pool
// is not a launch, and a worker counted once is not counted again.
func TestTickKeepsTheLatestBoots(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	register := h.registerBooted
	now := h.clock.Now()
	register("a", worker.Boot{LaunchedAt: now.Add(-200 * time.Second)})
	register("bridge", worker.Boot{LaunchedAt: now.Add(-40 * time.Second), FromPool: true})
	h.tick()
	h.advance(time.Minute)
	now = h.clock.Now()
	register("b", worker.Boot{LaunchedAt: now.Add(-100 * time.Second)})
	h.tick()
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{200 * time.Second, 100 * time.Second}; !slices.Equal(st.Boots, want) {
		t.Fatalf("boots %v, want %v", st.Boots, want)
	}
}
