package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func simulateJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), append([]string{"simulate", "--json", "--policy", "fleetq"}, args...), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var r struct{ Results []map[string]any }
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || len(r.Results) != 1 {
		t.Fatalf("%v: %s", err, out.String())
	}
	return r.Results[0]
}

func TestSimulateWarmWindowChangesTheFleetqRow(t *testing.T) {
	t.Parallel()
	cold := simulateJSON(t, "--workload", "backtest")
	warm := simulateJSON(t, "--workload", "backtest", "--warm", "08:00-22:00,min=8")
	if warm["p50_wait_s"].(float64) >= cold["p50_wait_s"].(float64) || warm["gpu_hours"].(float64) <= cold["gpu_hours"].(float64) {
		t.Fatalf("warm %v / cold %v: want a shorter median wait for more GPU-hours", warm, cold)
	}
	if cold["cost_per_job_usd"].(float64) <= 0 {
		t.Fatalf("no cost per job: %v", cold)
	}
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"simulate", "--warm", "8am-10pm,min=2"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `warm window "8am-10pm,min=2"`) {
		t.Fatalf("bad window: exit %d, %s", code, errOut.String())
	}
}

func TestSimulateSpotShortageAndFallback(t *testing.T) {
	t.Parallel()
	stuck := simulateJSON(t, "--workload", "video", "--spot-shortage", "10h-12h")
	rung := simulateJSON(t, "--workload", "video", "--spot-shortage", "10h-12h", "--fallback-after", "5m", "--on-demand-price", "2")
	if stuck["spot_launch_failures"].(float64) == 0 || stuck["on_demand_launches"].(float64) != 0 {
		t.Fatalf("without a rung: %v", stuck)
	}
	if rung["on_demand_launches"].(float64) == 0 || rung["max_wait_s"].(float64) >= stuck["max_wait_s"].(float64) {
		t.Fatalf("with a rung: %v", rung)
	}
	od, all := rung["on_demand_gpu_hours"].(float64), rung["gpu_hours"].(float64)
	if want := (all-od)*0.45 + od*2; rung["cost_usd"].(float64) < want-1e-6 || rung["cost_usd"].(float64) > want+1e-6 {
		t.Fatalf("cost %v, want %v at $2 an On-Demand hour", rung["cost_usd"], want)
	}
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"simulate", "--spot-shortage", "12h-10h"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `span "12h-10h"`) {
		t.Fatalf("bad span: exit %d, %s", code, errOut.String())
	}
}

func TestSimulateForecastSpendsForHistory(t *testing.T) {
	t.Parallel()
	cold := simulateJSON(t, "--workload", "video", "--days", "2")
	warm := simulateJSON(t, "--workload", "video", "--days", "2", "--forecast", "10")
	if g, c := warm["gpu_hours"].(float64), cold["gpu_hours"].(float64); g <= c || g > c+10 {
		t.Fatalf("forecast %.1f GPU-h, cold %.1f: want more, by at most one day's budget (the first day has no history)", g, c)
	}
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"simulate", "--forecast", "-1"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--forecast must be a budget") {
		t.Fatalf("negative budget: exit %d, %s", code, errOut.String())
	}
}

func TestSimulateSpotHotspotAndWeigh(t *testing.T) {
	t.Parallel()
	on := simulateJSON(t, "--workload", "regen3d", "--spot-hotspot", "g5.xlarge@a=2")
	off := simulateJSON(t, "--workload", "regen3d", "--spot-hotspot", "g5.xlarge@a=2", "--weigh=false")
	if a, b := on["spot_interruptions"].(float64), off["spot_interruptions"].(float64); 2*a > b {
		t.Fatalf("Spot interruptions %v weighing, %v with --weigh=false: want at most half", a, b)
	}
	for _, bad := range []string{"g5.xlarge=2", "g5.xlarge@a=-1", "g5.xlarge@a=2,12h-10h"} {
		var out, errOut bytes.Buffer
		if code := runCLI(t.Context(), []string{"simulate", "--spot-hotspot", bad}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "spot-hotspot") || !strings.Contains(errOut.String(), `hot spot "`+bad+`"`) || out.Len() != 0 {
			t.Errorf("%q: exit %d, %s", bad, code, errOut.String())
		}
	}
}

// --spot-pool gives fleetq's row a stopped Spot pool (beside the cold row),
// --pool-start-failure fails starts on a pair, and a pool larger than the
// fleet's max or a bad rate is refused.
func TestSimulateSpotPool(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"simulate", "--json", "--policy", "fleetq", "--workload", "backtest", "--spot-pool", "8",
		"--pool-start-failure", "g5.xlarge@a=1"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var r struct{ Results []map[string]any }
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || len(r.Results) != 2 {
		t.Fatalf("%v: %s", err, out.String())
	}
	cold, pool := r.Results[0], r.Results[1]
	if pool["policy"] != "fleetq spot-pool=8" || pool["pool_starts"] == nil || pool["pool_start_failures"] == nil || cold["pool_starts"] != nil ||
		pool["p50_wait_s"].(float64) >= cold["p50_wait_s"].(float64) {
		t.Fatalf("cold %v\npool %v: want the pool's row to start instances, fail some, and wait less", cold, pool)
	}
	for _, c := range []struct{ args, err string }{
		{"--spot-pool 11", "--spot-pool 11 is more than the fleet's max instances (10)"},
		{"--spot-pool 4 --pool-start-failure g5.xlarge@a=2", `pool start failure "g5.xlarge@a=2"`},
		{"--spot-pool 4 --spot-pool-pairs g5.xlarge", `pair "g5.xlarge"`},
	} {
		out.Reset()
		errOut.Reset()
		if code := runCLI(t.Context(), append([]string{"simulate", "--workload", "backtest"}, strings.Fields(c.args)...), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.err) {
			t.Errorf("%s: exit %d, %s", c.args, code, errOut.String())
		}
	}
}

func TestSimulateEstimates(t *testing.T) {
	t.Parallel()
	r := simulateJSON(t, "--workload", "backtest", "--estimates")
	es, ok := r["estimates"].(map[string]any)
	if !ok {
		t.Fatalf("no estimates in %v", r)
	}
	submit := es["at_submit"].(map[string]any)
	if submit["estimates"].(float64) != r["jobs"].(float64) || submit["within"].(float64) <= 0 {
		t.Fatalf("estimates at submit %v of %v jobs: want one per job, some within the goal", submit, r["jobs"])
	}
	if _, ok := simulateJSON(t, "--workload", "backtest")["estimates"]; ok {
		t.Fatal("estimates measured without --estimates")
	}
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"simulate", "--workload", "backtest", "--policy", "fleetq", "--estimates"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "fleetq start estimates") || !strings.Contains(out.String(), "at submit") {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
}
