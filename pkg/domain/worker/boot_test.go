package worker

import (
	"testing"
	"time"
)

func TestBootTimeline(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ws := []Worker{
		// A fresh launch without a warm-up, leased at once.
		{ID: "spot", Status: Active, Boot: Boot{LaunchedAt: at(0), AgentStartedAt: at(100), RunnerReadyAt: at(130)}, RegisteredAt: at(131), FirstClaimAt: at(132)},
		// A bridge started from the pool, with a warm-up.
		{ID: "bridge", Status: Active, Boot: Boot{LaunchedAt: at(0), FromPool: true, AgentStartedAt: at(20), RunnerReadyAt: at(50), WarmedUpAt: at(110)}, RegisteredAt: at(111)},
		// A second fresh launch with a warm-up, not leased yet.
		{ID: "spot2", Status: Active, Boot: Boot{LaunchedAt: at(0), AgentStartedAt: at(200), RunnerReadyAt: at(230), WarmedUpAt: at(290)}, RegisteredAt: at(291)},
		// Unhealthy (its warm-up failed): left out.
		{ID: "sick", Status: Unhealthy, Boot: Boot{LaunchedAt: at(0), AgentStartedAt: at(900)}, RegisteredAt: at(950)},
		// Reported nothing: a worker started by hand.
		{ID: "hand", Status: Active},
	}
	if got := ws[1].BootPhases(); len(got) != 4 || got[0].Name != "pool_start_to_agent" || got[0].Took != 20*time.Second ||
		got[2].Name != "runner_ready_to_warmed_up" || got[2].Took != time.Minute {
		t.Fatalf("the bridge's phases %+v", got)
	}
	tl := BootTimeline(ws)
	type want struct {
		name          string
		workers       int
		p50, p95, max int
	}
	wants := []want{
		{"launch_to_agent", 2, 100, 200, 200},
		{"pool_start_to_agent", 1, 20, 20, 20},
		{"agent_to_runner_ready", 3, 30, 30, 30},
		{"runner_ready_to_warmed_up", 2, 60, 60, 60},
		{"runner_ready_to_registered", 1, 1, 1, 1},
		{"warmed_up_to_registered", 2, 1, 1, 1},
		{"registered_to_first_lease", 1, 1, 1, 1},
	}
	if tl.Workers != 3 || len(tl.Phases) != len(wants) || tl.Slowest != "launch_to_agent" {
		t.Fatalf("timeline %+v: want 3 workers, %d phases, launch to agent the slowest", tl, len(wants))
	}
	for i, w := range wants {
		p := tl.Phases[i]
		if p.Name != w.name || p.Workers != w.workers || p.P50 != time.Duration(w.p50)*time.Second ||
			p.P95 != time.Duration(w.p95)*time.Second || p.Max != time.Duration(w.max)*time.Second {
			t.Errorf("phase %d = %+v, want %+v", i, p, w)
		}
	}
	if BootTimeline(ws[3:]).Workers != 0 {
		t.Fatal("a timeline of an unhealthy worker and one that reported nothing")
	}
}

// A start from the fleet's stopped Spot pool is its own phase, apart from
// a bridge's start from the On-Demand warm pool and from a launch, even
// when the agent also said it came from a pool.
func TestBootTimelineKeepsSpotPoolStartsApart(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ws := []Worker{
		{ID: "spot", Status: Active, Boot: Boot{LaunchedAt: at(0), AgentStartedAt: at(100)}},
		{ID: "bridge", Status: Active, Boot: Boot{LaunchedAt: at(0), FromPool: true, AgentStartedAt: at(20)}},
		{ID: "pool", Status: Active, Boot: Boot{LaunchedAt: at(0), FromPool: true, SpotPool: true, AgentStartedAt: at(30)}},
		{ID: "pool2", Status: Active, Boot: Boot{LaunchedAt: at(0), SpotPool: true, AgentStartedAt: at(40)}},
	}
	if got := ws[2].BootPhases(); len(got) != 1 || got[0].Name != "spot_pool_start_to_agent" || got[0].Took != 30*time.Second {
		t.Fatalf("the pool instance's phases %+v", got)
	}
	tl := BootTimeline(ws)
	want := []struct {
		name     string
		workers  int
		p50, max int
	}{{"launch_to_agent", 1, 100, 100}, {"pool_start_to_agent", 1, 20, 20}, {"spot_pool_start_to_agent", 2, 30, 40}}
	if tl.Workers != 4 || len(tl.Phases) != len(want) {
		t.Fatalf("timeline %+v: want 4 workers, %d phases", tl, len(want))
	}
	for i, w := range want {
		if p := tl.Phases[i]; p.Name != w.name || p.Workers != w.workers || p.P50 != time.Duration(w.p50)*time.Second || p.Max != time.Duration(w.max)*time.Second {
			t.Errorf("phase %d = %+v, want %+v", i, p, w)
		}
	}
}
