package sim

import (
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

func warmWindow(t *testing.T, spec string) fleetconfig.WarmWindow {
	t.Helper()
	w, err := fleetconfig.ParseWarmWindow(spec)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Warm capacity on the diurnal regen3d day: two spare instances during the
// working hours take the median wait below the shortest boot, within 15% of
// the oracle's GPU-hours (the goal docs/simulation.md records).
func goalWarmSpareBeatsTheBootOnRegen3D(t *testing.T) {
	w, _ := BuiltIn("regen3d", 1, 1)
	o := Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45}
	cold, _ := Simulate(w, []string{"fleetq", "oracle"}, o)
	o.Warm = []fleetconfig.WarmWindow{warmWindow(t, "08:00-22:00,spare=2")}
	warm, _ := Simulate(w, []string{"fleetq"}, o)
	f, c, or := warm.Results[0], cold.Results[0], cold.Results[1]
	if f.Killed != 0 || f.Completed != f.Jobs {
		t.Fatalf("warm fleetq killed %d, completed %d of %d", f.Killed, f.Completed, f.Jobs)
	}
	if boot := (3 * time.Minute).Seconds(); f.P50WaitS >= boot || f.P50WaitS >= c.P50WaitS {
		t.Errorf("warm p50 wait %.0fs, cold %.0fs: want below both and below the %.0fs boot", f.P50WaitS, c.P50WaitS, boot)
	}
	if f.GPUHours > 1.15*or.GPUHours {
		t.Errorf("warm fleetq billed %.1f GPU-h, more than 15%% over the oracle's %.1f", f.GPUHours, or.GPUHours)
	}
}

// On the bursty video day warmth buys wait with GPU-hours: a floor of
// eight instances from 08:00 to 22:00 leases the median job at once, and
// costs at most the floor's own hours on top of the cold run (the window
// ends with the workload's day: the hours the run goes on to finish its
// work are not billed as warm).
func TestWarmFloorOnVideoCostsAtMostItsHours(t *testing.T) {
	t.Parallel()
	w, _ := BuiltIn("video", 1, 1)
	o := Options{Seed: 1, SpotRate: 0.01, PricePerHour: 0.45}
	cold, _ := Simulate(w, []string{"fleetq"}, o)
	o.Warm = []fleetconfig.WarmWindow{warmWindow(t, "08:00-22:00,min=8")}
	warm, _ := Simulate(w, []string{"fleetq"}, o)
	f, c := warm.Results[0], cold.Results[0]
	if f.Killed != 0 || f.Completed != f.Jobs {
		t.Fatalf("warm fleetq killed %d, completed %d of %d", f.Killed, f.Completed, f.Jobs)
	}
	if f.P50WaitS >= (3 * time.Minute).Seconds() {
		t.Errorf("warm p50 wait %.0fs, want below the 3m boot", f.P50WaitS)
	}
	if bound := c.GPUHours + 8*14; f.GPUHours > bound || f.GPUHours <= c.GPUHours {
		t.Errorf("warm billed %.1f GPU-h, cold %.1f: want more, and at most the floor's 8 × 14 h on top (%.1f)", f.GPUHours, c.GPUHours, bound)
	}
}

// The bill is shared by slot time: two workflows whose jobs run 10 and 30
// minutes on one instance carry a quarter and three quarters of it, and
// cost per job is the bill over the jobs done.
func TestCostPerJobAndWorkflow(t *testing.T) {
	t.Parallel()
	w := Workload{Name: "two", Slots: 1, MaxInstances: 1, Jobs: []JobSpec{
		{Arrival: 0, Duration: 10 * time.Minute, Workflow: "short"},
		{Arrival: 0, Duration: 30 * time.Minute, Workflow: "long"},
	}}
	r := Run(w, Oracle{}, Options{Seed: 1, PricePerHour: 2, BootMin: 4 * time.Minute, BootMax: 4 * time.Minute, Horizon: 3 * time.Hour})
	if r.Completed != 2 || r.CostUSD <= 0 {
		t.Fatalf("%+v", r)
	}
	if got, want := r.CostPerJobUSD, r.CostUSD/2; got != want {
		t.Errorf("cost per job %.4f, want %.4f", got, want)
	}
	short, long := r.CostByWorkflow["short"], r.CostByWorkflow["long"]
	if d := short + long - r.CostUSD; d > 1e-9 || d < -1e-9 || long < 2.99*short || long > 3.01*short {
		t.Errorf("short %.4f + long %.4f of %.4f: want the bill split 1:3", short, long, r.CostUSD)
	}
}
