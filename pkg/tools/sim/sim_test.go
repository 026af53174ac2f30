package sim

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// policies are fresh instances of every policy (a policy keeps state over a run).
func policies() []Policy {
	return []Policy{NewFleetq(nil), NewFleetq(nil).WithBridge(4, 0), NewVisibleOnly(), NewTargetTracking(), NewKEDA(), Oracle{}}
}

func TestSameSeedSameNumbers(t *testing.T) {
	t.Parallel()
	for _, name := range BuiltIns {
		w1, _ := BuiltIn(name, 7, 1)
		w2, _ := BuiltIn(name, 7, 1)
		if !reflect.DeepEqual(w1, w2) {
			t.Fatalf("%s: the same seed generated different workloads", name)
		}
		for i, p := range policies() {
			a := Run(w1, p, Options{Seed: 7, SpotRate: 0.05})
			b := Run(w2, policies()[i], Options{Seed: 7, SpotRate: 0.05})
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%s/%s: two runs with seed 7 differ:\n%+v\n%+v", name, p.Name(), a, b)
			}
		}
		w3, _ := BuiltIn(name, 8, 1)
		if reflect.DeepEqual(w1.Jobs, w3.Jobs) {
			t.Fatalf("%s: seeds 7 and 8 generated the same jobs", name)
		}
	}
}

func TestEveryArrivalIsAccountedFor(t *testing.T) {
	t.Parallel()
	for _, name := range BuiltIns {
		w, _ := BuiltIn(name, 3, 1)
		for _, p := range policies() {
			r := Run(w, p, Options{Seed: 3, SpotRate: 0.1, Horizon: 20 * time.Hour})
			if r.Jobs != len(w.Jobs) || r.Completed+r.Dead+r.Queued+r.Running != r.Jobs {
				t.Fatalf("%s/%s: %d jobs = %d completed + %d dead + %d queued + %d running?", name, p.Name(), r.Jobs, r.Completed, r.Dead, r.Queued, r.Running)
			}
			if r.BusyGPUHours > r.GPUHours+1e-9 || r.Utilization > 1 {
				t.Fatalf("%s/%s: busy %.2f h of %.2f billed", name, p.Name(), r.BusyGPUHours, r.GPUHours)
			}
		}
	}
}

// seedScenario is the investigation's regression: a few long jobs arrive
// at once and run far longer than any idle window; every message is gone
// from the queue the moment a worker receives it.
func seedScenario() Workload {
	w := Workload{Name: "seed", Slots: 1, MaxInstances: 20}
	for range 3 {
		w.Jobs = append(w.Jobs, JobSpec{Arrival: 0, Duration: 60 * time.Minute, Workflow: "video"})
	}
	return w
}

func TestSeedRegressionVisibleOnlyKillsBusyWorkers(t *testing.T) {
	t.Parallel()
	r := Run(seedScenario(), NewVisibleOnly(), Options{Seed: 1, BootMin: 3 * time.Minute, BootMax: 3 * time.Minute, Horizon: 6 * time.Hour})
	if r.Killed == 0 {
		t.Fatalf("visible-only killed no busy worker: %+v", r)
	}
	for _, p := range []Policy{Oracle{}, NewFleetq(nil)} {
		o := Run(seedScenario(), p, Options{Seed: 1, BootMin: 3 * time.Minute, BootMax: 3 * time.Minute, Horizon: 6 * time.Hour})
		if o.Killed != 0 || o.Completed != 3 {
			t.Fatalf("%s: %+v", p.Name(), o)
		}
	}
}

// The targets docs/simulation.md reports, on the built-in workloads with the
// default seed and options of fleetq simulate: fleetq kills no job, bills
// within 15% of the oracle's GPU-hours and fewer than KEDA, leases the
// first job after idle within the boot delay plus a minute, and no baseline
// beats it on both GPU-hours and p95 wait.
// TestFleetqMeetsItsTargets holds the goals docs/simulation.md records as
// met: against the baselines on every built-in workload, and the goals of
// warm capacity, the forecast, the Spot shortage, tenant fairness, the
// bridge and the start estimates.
func TestFleetqMeetsItsTargets(t *testing.T) {
	t.Parallel()
	t.Run("against_the_baselines", fleetqBeatsTheBaselines)
	t.Run("warm_spare_beats_the_boot_on_regen3d", goalWarmSpareBeatsTheBootOnRegen3D)
	t.Run("forecast_beats_the_boot_on_regen3d", goalForecastBeatsTheBootOnRegen3D)
	t.Run("spot_shortage_falls_back_to_on-demand", goalSpotShortageFallsBackToOnDemand)
	t.Run("fair_share_shields_the_others_from_a_burst", goalFairShareShieldsTheOthersFromABurst)
	t.Run("bridge_starts_cold_work_within_a_minute", goalBridgeStartsColdWorkWithinAMinute)
	t.Run("spot_pool_starts_cold_work_within_a_minute_at_spot_prices", goalSpotPoolStartsColdWorkAtSpotPrices)
	t.Run("start_estimates_within_the_goal", goalStartEstimatesWithinTheGoal)
}

func fleetqBeatsTheBaselines(t *testing.T) {
	o := Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45}
	for _, name := range BuiltIns {
		w, _ := BuiltIn(name, 1, 1)
		r, err := Simulate(w, []string{"fleetq", "keda", "oracle", "visible-only", "target-tracking"}, o)
		if err != nil {
			t.Fatal(err)
		}
		f, k, or := r.Results[0], r.Results[1], r.Results[2]
		// No baseline is better than fleetq on both GPU-hours and p95 wait.
		for _, b := range []Result{k, r.Results[3], r.Results[4]} {
			if b.GPUHours < f.GPUHours && b.P95WaitS < f.P95WaitS {
				t.Errorf("%s: %s bills %.1f GPU-h with a p95 wait of %.0fs, better on both than fleetq's %.1f and %.0fs", name, b.Policy, b.GPUHours, b.P95WaitS, f.GPUHours, f.P95WaitS)
			}
		}
		if f.Killed != 0 || f.Completed != f.Jobs {
			t.Errorf("%s: fleetq killed %d, completed %d of %d", name, f.Killed, f.Completed, f.Jobs)
		}
		if f.GPUHours > 1.15*or.GPUHours {
			t.Errorf("%s: fleetq billed %.1f GPU-h, more than 15%% over the oracle's %.1f", name, f.GPUHours, or.GPUHours)
		}
		if f.GPUHours >= k.GPUHours {
			t.Errorf("%s: fleetq billed %.1f GPU-h, KEDA %.1f", name, f.GPUHours, k.GPUHours)
		}
		if max := (5*time.Minute + time.Minute).Seconds(); f.TTFLIdleMaxS > max {
			t.Errorf("%s: fleetq's time to first lease from idle %.0fs > boot + 60s (%.0fs)", name, f.TTFLIdleMaxS, max)
		}
	}
}

func obs(now time.Duration, queued, leased, desired int, inst ...InstanceView) Observation {
	return Observation{Now: now, Queued: queued, Leased: leased, Desired: desired, Slots: 1, MaxInstances: 10, Instances: inst}
}

func TestVisibleOnlyFollowsTheSeedLambda(t *testing.T) {
	t.Parallel()
	p := NewVisibleOnly()
	if a := p.Decide(Tick, obs(0, 3, 0, 0)); a.Desired != 3 {
		t.Fatalf("visible 3: desired %d", a.Desired)
	}
	if a := p.Decide(Tick, obs(time.Minute, 12, 0, 3)); a.Desired != 5 {
		t.Fatalf("visible 12: desired %d, want the backlog cap of 5", a.Desired)
	}
	// One visible message while four jobs run: desired follows visible only.
	if a := p.Decide(Tick, obs(2*time.Minute, 1, 4, 5)); a.Desired != 1 {
		t.Fatalf("visible 1 with 4 running: desired %d, want 1 (running work is invisible)", a.Desired)
	}
	if a := p.Decide(Tick, obs(3*time.Minute, 0, 4, 1)); a.Desired != -1 {
		t.Fatal("the first zero reading holds")
	}
	if a := p.Decide(Tick, obs(22*time.Minute, 0, 4, 1)); a.Desired != -1 {
		t.Fatal("19 minutes of zero still hold")
	}
	if a := p.Decide(Tick, obs(23*time.Minute, 0, 4, 1)); a.Desired != 0 {
		t.Fatalf("20 minutes of zero: desired %d, want min", a.Desired)
	}
}

func TestTargetTrackingTiming(t *testing.T) {
	t.Parallel()
	p := NewTargetTracking()
	reg := func(n int) []InstanceView {
		var out []InstanceView
		for i := range n {
			out = append(out, InstanceView{ID: i + 1, Registered: true, Busy: 1})
		}
		return out
	}
	if a := p.Decide(Tick, obs(time.Minute, 1, 0, 0)); a.Desired != -1 {
		t.Fatal("the first datapoint is not evaluated until it is published")
	}
	if a := p.Decide(Tick, obs(2*time.Minute, 1, 0, 0)); a.Desired != 1 {
		t.Fatalf("step alarm: desired %d, want 1", a.Desired)
	}
	// 1 instance, depth 8: backlog 8 per instance > 2 for 3 datapoints.
	var a Action
	for i := range 3 {
		a = p.Decide(Tick, obs(time.Duration(3+i)*time.Minute, 7, 1, 1, reg(1)...))
	}
	if a.Desired != -1 {
		t.Fatal("scale out needs three datapoints above target, evaluated a minute late")
	}
	a = p.Decide(Tick, obs(6*time.Minute, 7, 1, 1, reg(1)...))
	if a.Desired != 4 {
		t.Fatalf("scale out: desired %d, want ceil(1 * 8/2) = 4", a.Desired)
	}
	// 4 instances with 4 jobs: backlog 1 < 1.8 for 15 datapoints → ceil(4*1/2) = 2.
	for i := range 15 {
		a = p.Decide(Tick, obs(time.Duration(7+i)*time.Minute, 0, 4, 4, reg(4)...))
		if i < 14 && a.Desired != -1 {
			t.Fatalf("scale in after %d datapoints", i+1)
		}
	}
	if a = p.Decide(Tick, obs(22*time.Minute, 0, 4, 4, reg(4)...)); a.Desired != 2 {
		t.Fatalf("scale in: desired %d, want 2 (busy instances included: the group picks)", a.Desired)
	}
}

func TestKEDAStabilizesScaleDown(t *testing.T) {
	t.Parallel()
	p := NewKEDA()
	if a := p.Decide(Tick, obs(0, 3, 2, 0)); a.Desired != 5 {
		t.Fatalf("scale up: %d, want visible + in flight = 5", a.Desired)
	}
	if a := p.Decide(Tick, obs(30*time.Second, 0, 2, 5)); a.Desired != 5 {
		t.Fatalf("within the window the highest recommendation holds: %d", a.Desired)
	}
	if a := p.Decide(Tick, obs(331*time.Second, 0, 2, 5)); a.Desired != 2 {
		t.Fatalf("after the window: %d, want 2", a.Desired)
	}
	if a := p.Decide(Tick, obs(600*time.Second, 0, 0, 2)); a.Desired != 2 {
		t.Fatalf("cooldown not over: %d", a.Desired)
	}
	if a := p.Decide(Tick, obs(900*time.Second, 0, 0, 2)); a.Desired != 0 {
		t.Fatalf("after 300 s without messages: %d, want 0", a.Desired)
	}
	if NewKEDA().Victims() != VictimNewest {
		t.Fatal("the ReplicaSet removes the newest pods")
	}
}

func TestOracleTerminatesOnlyIdleInstances(t *testing.T) {
	t.Parallel()
	a := Oracle{}.Decide(Idle, obs(0, 0, 1, 3,
		InstanceView{ID: 1, Registered: true, Busy: 1},
		InstanceView{ID: 2, Registered: true},
		InstanceView{ID: 3, Registered: true}))
	if !reflect.DeepEqual(a.Terminate, []int{2, 3}) {
		t.Fatalf("terminate %v, want the two idle instances", a.Terminate)
	}
	if a := (Oracle{}).Decide(Arrival, obs(0, 2, 1, 1, InstanceView{ID: 1, Registered: true, Busy: 1})); a.Desired != 3 {
		t.Fatalf("arrival: desired %d, want one instance per job", a.Desired)
	}
}

func TestCSVWorkload(t *testing.T) {
	t.Parallel()
	w, err := LoadCSV("jobs.csv", strings.NewReader("arrival_seconds,duration_seconds,workflow\n60,600,render\n0,30\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 2 || w.Jobs[0].Arrival != 0 || w.Jobs[1].Workflow != "render" || w.Jobs[1].Duration != 10*time.Minute {
		t.Fatalf("jobs %+v", w.Jobs)
	}
	for _, bad := range []string{"", "1\n", "10,-5\n", "a,b\nx,1\n"} {
		if _, err := LoadCSV("bad.csv", strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestBuiltInWorkloadsMatchTheirDesigns(t *testing.T) {
	t.Parallel()
	w, _ := BuiltIn("regen3d", 1, 3)
	perDay := float64(len(w.Jobs)) / 3
	var total time.Duration
	for _, j := range w.Jobs {
		total += j.Duration
	}
	mean := total / time.Duration(len(w.Jobs))
	if perDay < 900 || perDay > 1100 || mean < 32*time.Minute || mean > 38*time.Minute {
		t.Fatalf("regen3d: %.0f jobs a day of mean %v, want about 1,000 of about 35 minutes", perDay, mean)
	}
	if _, err := BuiltIn("nope", 1, 1); err == nil {
		t.Fatal("unknown workload accepted")
	}
}

func TestPlotWritesSVGAndPNG(t *testing.T) {
	t.Parallel()
	w, _ := BuiltIn("backtest", 1, 1)
	r := Report{Workload: "backtest", Seed: 1}
	for _, p := range []Policy{NewVisibleOnly(), Oracle{}} {
		r.Results = append(r.Results, Run(w, p, Options{Seed: 1}))
	}
	var svg, png strings.Builder
	if err := r.WritePlot(&svg, "out.svg"); err != nil || !strings.Contains(svg.String(), "<svg") || !strings.Contains(svg.String(), "visible-only") {
		t.Fatalf("svg: %v (%d bytes)", err, svg.Len())
	}
	if err := r.WritePlot(&png, "out.PNG"); err != nil || !strings.HasPrefix(png.String(), "\x89PNG") {
		t.Fatalf("png: %v", err)
	}
	if err := r.WritePlot(&svg, "out.gif"); err == nil {
		t.Fatal("a .gif name was accepted")
	}
}

// BenchmarkSimulateRegen3D: every policy over a day of the regen3d workload,
// what `fleetq simulate --workload regen3d` runs.
func BenchmarkSimulateRegen3D(b *testing.B) {
	w, _ := BuiltIn("regen3d", 1, 1)
	for b.Loop() {
		if _, err := Simulate(w, []string{"all"}, Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCSVTenantColumn(t *testing.T) {
	t.Parallel()
	w, err := LoadCSV("t.csv", strings.NewReader("0,60,render,acme\n5,60\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Jobs[0].Tenant != "acme" || w.Jobs[1].Tenant != "" {
		t.Fatalf("tenants %q %q", w.Jobs[0].Tenant, w.Jobs[1].Tenant)
	}
}

func TestIntegerTicks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{{0, 5.5, "0,1,2,3,4,5"}, {0, 21, "0,5,10,15,20"}, {0, 120, "0,20,40,60,80,100,120"}} {
		var got []string
		for _, tk := range (integerTicks{}).Ticks(c.lo, c.hi) {
			got = append(got, tk.Label)
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("ticks %v..%v = %v, want %s", c.lo, c.hi, got, c.want)
		}
	}
}

func TestPlotMarksKills(t *testing.T) {
	t.Parallel()
	r := Report{Workload: "seed", Seed: 1, Results: []Result{Run(seedScenario(), NewVisibleOnly(), Options{Seed: 1, BootMin: 3 * time.Minute, BootMax: 3 * time.Minute, Horizon: 6 * time.Hour})}}
	if r.Results[0].Killed == 0 || len(r.Results[0].KillTimes) != r.Results[0].Killed {
		t.Fatalf("killed %d, %d kill times", r.Results[0].Killed, len(r.Results[0].KillTimes))
	}
	var svg strings.Builder
	if err := r.WritePlot(&svg, "k.svg"); err != nil || !strings.Contains(svg.String(), "job killed") {
		t.Fatalf("svg without the kill legend: %v", err)
	}
}

func TestParetoWritesOnePointPerResult(t *testing.T) {
	t.Parallel()
	w, _ := BuiltIn("backtest", 1, 1)
	r, _ := Simulate(w, []string{"fleetq", "keda"}, Options{Seed: 1})
	var svg strings.Builder
	if err := WritePareto(&svg, "p.svg", "backtest", r.Results); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("fleetq: %.1f GPU-h", r.Results[0].GPUHours), fmt.Sprintf("keda: %.1f GPU-h, p95 %s, killed %d", r.Results[1].GPUHours, dur(r.Results[1].P95WaitS), r.Results[1].Killed), "GPU-hours"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if err := WritePareto(&svg, "p.gif", "x", r.Results); err == nil {
		t.Error("a .gif name was accepted")
	}
}
