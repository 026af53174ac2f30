package sim

import (
	"math"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// The work item's goals for the stopped Spot pool (docs/simulation.md,
// "Cold start: the Spot pool"): from an empty fleet, with a pool of 16 on
// video and 10 on backtest (60 GB volumes), the median wait is at most a
// minute at no more than 1.15 × the oracle's dollars, nothing busy is
// stopped or killed, and every job completes — also with 30% of the starts
// on one pair failing for want of Spot capacity, when the failed start's
// jobs wait for the next start on another pair. With the On-Demand bridge
// as the fallback the wait goal holds but the dollars do not: the test
// holds them where they are measured.
func goalSpotPoolStartsColdWorkAtSpotPrices(t *testing.T) {
	failing := []PoolFailure{{Pair: DefaultPoolPairs[0], Rate: 0.3}}
	for _, c := range []struct {
		workload string
		pool     int
		failures []PoolFailure
		bridge   int
		maxCost  float64 // × the oracle's dollars
	}{
		// With a bridge, a failed start's jobs still go to another pair's
		// stopped instance first: the goal holds there too.
		{"video", 16, nil, 0, 1.15}, {"video", 16, failing, 0, 1.15}, {"video", 16, failing, 2, 1.15},
		{"backtest", 10, nil, 0, 1.15}, {"backtest", 10, failing, 0, 1.15}, {"backtest", 10, failing, 2, 1.15},
	} {
		w, _ := BuiltIn(c.workload, 1, 1)
		o := Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45, SpotPool: c.pool, PoolStartFailures: c.failures, Bridge: c.bridge}
		r, err := Simulate(w, []string{"fleetq", "oracle"}, o)
		if err != nil {
			t.Fatal(err)
		}
		cold, p, or := r.Results[0], r.Results[1], r.Results[2]
		name := p.Policy + " on " + c.workload
		if len(c.failures) > 0 {
			name += " with 30% failed starts on " + c.failures[0].Pair.String()
		}
		if cold.PoolStarts != 0 || p.PoolStarts == 0 || or.Policy != "oracle" {
			t.Fatalf("%s: rows %s (%d pool starts), %s (%d), %s: want fleetq without, then with the pool", name, cold.Policy, cold.PoolStarts, p.Policy, p.PoolStarts, or.Policy)
		}
		if len(c.failures) > 0 && p.PoolStartFailures == 0 {
			t.Errorf("%s: no start failed", name)
		}
		if c.bridge > 0 && p.BridgeStarts == 0 {
			t.Errorf("%s: no bridge started", name)
		}
		if p.P50WaitS > 60 {
			t.Errorf("%s: p50 wait %.0fs, want ≤ 60s", name, p.P50WaitS)
		}
		if p.Killed != 0 || p.PoolBusyStops != 0 || p.PoolBadStarts != 0 || p.Completed != p.Jobs {
			t.Errorf("%s: killed %d, busy stops %d, bad starts %d, completed %d of %d", name, p.Killed, p.PoolBusyStops, p.PoolBadStarts, p.Completed, p.Jobs)
		}
		// (Bridges start beyond the groups' max, as they always have: only
		// the pool and the groups are held to it.)
		if c.bridge == 0 && p.PeakInstances > w.MaxInstances {
			t.Errorf("%s: %d instances at the peak, past the fleet's max %d", name, p.PeakInstances, w.MaxInstances)
		}
		if x := p.CostUSD / or.CostUSD; x > c.maxCost {
			t.Errorf("%s: costs %.3f× the oracle's dollars, more than %.2f×", name, x, c.maxCost)
		}
	}
}

// A pool instance's hours are billed at the Spot price, a minute at least
// per start, and the pool's volumes for every hour of the workload's day.
func TestSpotPoolCostIsSpotHoursAMinuteAtLeastAndVolumes(t *testing.T) {
	t.Parallel()
	// One 10-second job: its instance runs for the start, the job, and
	// until the tick stops it.
	w := Workload{Name: "one", Slots: 1, MaxInstances: 4, Jobs: []JobSpec{{Arrival: 30 * time.Second, Duration: 10 * time.Second, Workflow: "x"}}}
	o := Options{Seed: 1, PricePerHour: 0.45, SpotPool: 3, PoolStartMin: 5 * time.Second, PoolStartMax: 5 * time.Second}
	r := Run(w, policyMakers["fleetq"](o), o)
	if r.PoolStarts != 1 || r.PoolJobs != 1 || r.PoolStops != 1 || r.Launches != 0 {
		t.Fatalf("%d pool starts, %d jobs on the pool, %d stops, %d group launches: want one start, its job, one stop, no launch", r.PoolStarts, r.PoolJobs, r.PoolStops, r.Launches)
	}
	// Started at 30s, registered at 35s, done at 45s, stopped at the 60s
	// tick: 30 s running, billed a minute.
	if r.SpotPoolGPUHours != time.Minute.Hours() || r.GPUHours != r.SpotPoolGPUHours {
		t.Fatalf("pool hours %.4f of %.4f, want one minute (%.4f)", r.SpotPoolGPUHours, r.GPUHours, time.Minute.Hours())
	}
	storage := 3 * DefaultPoolVolumeGB * DefaultEBSPrice * 24 / 730.0
	if math.Abs(r.SpotPoolStorageUSD-storage) > 1e-9 {
		t.Fatalf("pool volumes $%.4f, want 3 × %d GB × $%.2f/GB-month for a day = $%.4f", r.SpotPoolStorageUSD, DefaultPoolVolumeGB, DefaultEBSPrice, storage)
	}
	if want := r.SpotPoolGPUHours*0.45 + storage; math.Abs(r.CostUSD-want) > 1e-9 {
		t.Fatalf("cost $%.4f, want pool hours × Spot + volumes = $%.4f", r.CostUSD, want)
	}
}

// One job on an empty fleet waits for a pool instance's start: the
// stopped instance's start delay, not a launch's boot.
func TestSpotPoolStartDelay(t *testing.T) {
	t.Parallel()
	w := Workload{Name: "one", Slots: 1, MaxInstances: 4, Jobs: []JobSpec{{Arrival: 30 * time.Second, Duration: 20 * time.Minute, Workflow: "x"}}}
	for seed := range uint64(20) {
		o := Options{Seed: seed, SpotPool: 3}
		r := Run(w, policyMakers["fleetq"](o), o)
		lo, hi := DefaultStoppedStart[0].Seconds(), DefaultStoppedStart[1].Seconds()
		if r.PoolJobs != 1 || r.P50WaitS < lo || r.P50WaitS > hi || r.Launches != 0 {
			t.Fatalf("seed %d: %d on the pool, waited %.0fs, %d group launches; want the start delay %.0f-%.0fs and no launch", seed, r.PoolJobs, r.P50WaitS, r.Launches, lo, hi)
		}
	}
}

// A start that fails for want of Spot capacity hands its jobs to a stopped
// instance on another pair first (one more start), not to On-Demand; the
// failed pair is avoided, so the next work starts elsewhere too.
func TestSpotPoolFailedStartTriesAnotherPairBeforeOnDemand(t *testing.T) {
	t.Parallel()
	// Every start on g5.xlarge@a fails; the pool's first start goes there
	// (the first pair), its job to another pair's instance.
	w := Workload{Name: "two", Slots: 1, MaxInstances: 4, Jobs: []JobSpec{
		{Arrival: 30 * time.Second, Duration: 5 * time.Minute, Workflow: "x"},
		{Arrival: 40 * time.Minute, Duration: 5 * time.Minute, Workflow: "x"}}}
	o := Options{Seed: 1, SpotPool: 3, Bridge: 2, PoolStartFailures: []PoolFailure{{Pair: DefaultPoolPairs[0], Rate: 1}}}
	p := policyMakers["fleetq"](o).(*Fleetq)
	p.settings.SpotPool.Avoid = time.Hour
	r := Run(w, p, o)
	if r.PoolStartFailures != 1 || r.PoolFallbackJobs != 0 || r.BridgeStarts != 0 || r.BridgedJobs != 0 {
		t.Fatalf("%d failed starts, %d jobs to On-Demand, %d bridge starts, %d jobs on a bridge: want one failure whose job another pair's start takes", r.PoolStartFailures, r.PoolFallbackJobs, r.BridgeStarts, r.BridgedJobs)
	}
	if r.PoolStarts != 2 || r.PoolJobs != 2 || r.Completed != 2 || r.Launches != 0 {
		t.Fatalf("%d pool starts, %d jobs on the pool, %d completed, %d launches: want both jobs on the pool", r.PoolStarts, r.PoolJobs, r.Completed, r.Launches)
	}
}

// When every other pair fails too (or is avoided), exactly the failed
// start's jobs go to the On-Demand bridge.
func TestSpotPoolFailedStartFallsBackForItsJobsOnly(t *testing.T) {
	t.Parallel()
	w := Workload{Name: "one", Slots: 1, MaxInstances: 4, Jobs: []JobSpec{{Arrival: 30 * time.Second, Duration: 5 * time.Minute, Workflow: "x"}}}
	var short []PoolFailure
	for _, pair := range DefaultPoolPairs {
		short = append(short, PoolFailure{Pair: pair, Rate: 1})
	}
	o := Options{Seed: 1, SpotPool: 3, Bridge: 2, PoolStartFailures: short}
	r := Run(w, policyMakers["fleetq"](o), o)
	if r.PoolStartFailures != len(DefaultPoolPairs) || r.PoolFallbackJobs != 1 || r.BridgeStarts != 1 || r.BridgedJobs != 1 {
		t.Fatalf("%d failed starts, %d jobs to On-Demand, %d bridge starts, %d jobs on a bridge: want a failure on each pair, then one bridge for the one job", r.PoolStartFailures, r.PoolFallbackJobs, r.BridgeStarts, r.BridgedJobs)
	}
	if r.PoolStarts != 0 || r.Completed != 1 {
		t.Fatalf("%d pool starts, %d completed", r.PoolStarts, r.Completed)
	}
}

// Under many Spot interruptions (which stop pool instances, restarted only
// by EC2), failed starts, and every built-in workload, fleetq never stops a
// pool instance running a job, never starts one that is not stopped (an
// interrupted one above all), kills nothing, and every job ends.
func TestSpotPoolNeverStopsABusyInstanceNorStartsAnInterruptedOne(t *testing.T) {
	t.Parallel()
	interrupted := 0
	for _, name := range BuiltIns {
		w, _ := BuiltIn(name, 5, 1)
		for _, size := range []int{3, 12} {
			o := Options{Seed: 5, SpotRate: 0.3, SpotPool: size, PoolRestart: 5 * time.Minute,
				PoolStartFailures: []PoolFailure{{Pair: DefaultPoolPairs[1], Rate: 0.5}}}
			r := Run(w, policyMakers["fleetq"](o), o)
			if r.Killed != 0 || r.PoolBusyStops != 0 || r.PoolBadStarts != 0 || r.Completed != r.Jobs || r.PoolStarts == 0 {
				t.Fatalf("%s, pool %d: killed %d, busy stops %d, bad starts %d, completed %d of %d, %d starts", name, size, r.Killed, r.PoolBusyStops, r.PoolBadStarts, r.Completed, r.Jobs, r.PoolStarts)
			}
			interrupted += r.PoolInterruptions
		}
	}
	if interrupted == 0 {
		t.Fatal("no pool instance was interrupted: the property is not exercised")
	}
}

func TestParsePoolFailure(t *testing.T) {
	t.Parallel()
	f, err := ParsePoolFailure("g5.xlarge@a=0.3")
	if err != nil || f.Pair != (scaling.Pair{InstanceType: "g5.xlarge", Zone: "a"}) || f.Rate != 0.3 {
		t.Fatalf("%+v, %v", f, err)
	}
	for _, bad := range []string{"g5.xlarge@a", "g5.xlarge=0.3", "@a=0.3", "g5.xlarge@a=1.5", "g5.xlarge@a=-1", "g5.xlarge@a=x"} {
		if _, err := ParsePoolFailure(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
