//go:build !agent

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/tools/sim"
)

func init() {
	register("simulate", "replay a day of GPU work through fleetq's scaling policy and today's alternatives", runSimulate)
}

func runSimulate(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetq simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workload := fs.String("workload", "regen3d", "regen3d, video, backtest, tenants, tenants-steady, or a CSV file of arrival_seconds,duration_seconds[,workflow[,tenant]]")
	policy := fs.String("policy", "all", "all, or a comma-separated list of: "+strings.Join(sim.PolicyNames(), ", "))
	seed := fs.Uint64("seed", 1, "random seed: the same flags give the same numbers")
	days := fs.Int("days", 1, "days of arrivals to generate (built-in workloads)")
	configFile := fs.String("config", "", "fleet config whose fleet settings (slots, min/max, idle window, grace, boot timeout) feed the policies")
	fleetSlug := fs.String("fleet", "", "the fleet of --config to use (default: its first)")
	spot := fs.Float64("spot-rate", 0.01, "Spot interruptions per instance-hour")
	price := fs.Float64("price", 0.45, "cost of one GPU instance-hour in dollars")
	bootMin := fs.Duration("boot-min", 3*time.Minute, "shortest launch-to-registered delay")
	bootMax := fs.Duration("boot-max", 5*time.Minute, "longest launch-to-registered delay")
	var shortages []sim.Span
	fs.Func("spot-shortage", "a span with no Spot capacity, FROM-TO as durations from the start (e.g. 10h-12h): Spot launches fail; repeatable", func(v string) error {
		sp, err := sim.ParseSpan(v)
		if err == nil {
			shortages = append(shortages, sp)
		}
		return err
	})
	var hotspots []sim.Hotspot
	fs.Func("spot-hotspot", "interrupt one instance type in one zone at its own rate, TYPE@ZONE=RATE[,FROM-TO] in interruptions per instance-hour (e.g. g5.xlarge@a=2); Spot instances launch on the --config fleet's instance types (default "+strings.Join(sim.DefaultSpotTypes, ", ")+") in zones "+strings.Join(sim.SpotZones, ", ")+"; repeatable", func(v string) error {
		h, err := sim.ParseHotspot(v)
		if err == nil {
			hotspots = append(hotspots, h)
		}
		return err
	})
	weigh := fs.Bool("weigh", true, "fleetq's policy weighs down recently interrupted Spot types and zones, as the scaler does (false: it places Spot launches like the baselines: the first type, zones in turn)")
	fallback := fs.Duration("fallback-after", 0, "turn on fleetq's On-Demand rung: launches move to On-Demand once Spot has been short this long (default: the --config fleet's on_demand.fallback_after; 0: none)")
	waitSLO := fs.Duration("wait-slo", 0, "with an On-Demand rung, move launches to On-Demand as soon as Spot is short and the oldest queued job has waited this long (default: the --config fleet's on_demand.wait_slo; 0: none)")
	fair := fs.Bool("fair-share", false, "free slots take jobs by tenant (lowest leased share first) instead of oldest first across tenants")
	tenantCap := fs.Int("tenant-max-leased", 0, "with --fair-share, at most this many leased jobs per tenant (0: no cap)")
	preemptionCap := fs.Int("preemption-cap", 0, "Spot interruptions a job may take before it goes dead, or, with an On-Demand rung, runs only on On-Demand (default: the --config fleet's preemption_cap, else 5)")
	odPrice := fs.Float64("on-demand-price", 0, fmt.Sprintf("cost of one On-Demand instance-hour in dollars (default: the --config fleet's on_demand.price_per_hour, else %.3f)", sim.DefaultOnDemandPrice))
	bridge := fs.Int("bridge", 0, "give fleetq's policy bridge capacity: a warm pool of N stopped instances on the On-Demand group, started when work arrives that running workers cannot take; the table shows fleetq without and with it (default: the --config fleet's bridge.pool)")
	bridgeState := fs.String("bridge-state", "", "the bridge pool's state: stopped or hibernated (default: the --config fleet's bridge.state, else stopped)")
	bridgeMax := fs.Duration("bridge-max", 0, "a bridge instance's longest life: past it, it takes no new job (default: the --config fleet's bridge.max_minutes, else 30m)")
	spotPool := fs.Int("spot-pool", 0, "give fleetq's policy a stopped Spot pool of N instances, started when work arrives that running workers cannot take and stopped back into the pool when idle; the table shows fleetq without and with it")
	var poolPairs []scaling.Pair
	fs.Func("spot-pool-pairs", "the Spot pool's instance type × zone pairs, TYPE@ZONE,TYPE@ZONE,... (default "+pairList(sim.DefaultPoolPairs)+")", func(v string) error {
		poolPairs = nil
		for _, x := range strings.Split(v, ",") {
			p, err := sim.ParsePair(x)
			if err != nil {
				return err
			}
			poolPairs = append(poolPairs, p)
		}
		return nil
	})
	var poolFailures []sim.PoolFailure
	fs.Func("pool-start-failure", "the share of Spot pool starts on one pair that fail for want of Spot capacity, TYPE@ZONE=RATE from 0 to 1 (e.g. g5.xlarge@a=0.3); repeatable", func(v string) error {
		f, err := sim.ParsePoolFailure(v)
		if err == nil {
			poolFailures = append(poolFailures, f)
		}
		return err
	})
	poolIdle := fs.Duration("pool-idle", 0, "how long an idle Spot pool instance runs on for the next job before it is stopped back into the pool (0: stopped at the first tick that finds it idle and not needed)")
	poolStartMin := fs.Duration("pool-start-min", sim.DefaultStoppedStart[0], "shortest delay from a Spot pool start to a registered worker (an assumption for g5/g6: measure it)")
	poolStartMax := fs.Duration("pool-start-max", sim.DefaultStoppedStart[1], "longest delay from a Spot pool start to a registered worker")
	estimates := fs.Bool("estimates", false, "also measure fleetq's start estimates: at each submit and each tick project every queued job's start (eta.Project) and report the share within max(60s, 20% of the wait) of the actual lease")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	paretoFile := fs.String("pareto", "", "also draw GPU-hours against p95 wait, one point per policy plus fleetq with warm spares (08:00-22:00, 1, 2 and 4), to FILE.svg or FILE.png")
	plotFile := fs.String("plot", "", "also draw instances in service and jobs waiting over time to FILE.svg or FILE.png")
	forecastBudget := fs.Float64("forecast", 0, "turn on fleetq's forecast of the fleet's own arrivals with this budget of GPU-hours a day (lookback 7 days, lead 5m; use --days to give it history; 0: the --config fleet's forecast)")
	var warm []fleetconfig.WarmWindow
	fs.Func("warm", "a warm window for fleetq's policy, HH:MM-HH:MM,min=N,spare=N[,days=mon+tue] (UTC; the simulation starts on a Thursday at 00:00); repeatable", func(v string) error {
		w, err := fleetconfig.ParseWarmWindow(v)
		if err == nil {
			warm = append(warm, w)
		}
		return err
	})
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fleetq simulate [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Simulates a fleet under each scaling policy over the same workload and prints one row per policy.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	w, err := loadWorkload(*workload, *seed, *days)
	if err != nil {
		fmt.Fprintln(stderr, "fleetq simulate:", err)
		return 2
	}
	o := sim.Options{Seed: *seed, SpotRate: *spot, PricePerHour: *price, BootMin: *bootMin, BootMax: *bootMax, Warm: warm,
		SpotShortages: shortages, FallbackAfter: *fallback, WaitSLO: *waitSLO, OnDemandPricePerHour: *odPrice, PreemptionCap: *preemptionCap,
		FairShare: *fair, TenantMaxLeased: *tenantCap, SpotHotspots: hotspots, NoWeigh: !*weigh,
		Bridge: *bridge, BridgeState: *bridgeState, BridgeMaxLife: *bridgeMax,
		SpotPool: *spotPool, SpotPoolPairs: poolPairs, PoolStartFailures: poolFailures, PoolStartMin: *poolStartMin, PoolStartMax: *poolStartMax, PoolIdle: *poolIdle, Estimates: *estimates}
	if *spotPool < 0 {
		fmt.Fprintln(stderr, "fleetq simulate: --spot-pool must be a pool size >= 0")
		return 2
	}
	if *poolStartMin <= 0 || *poolStartMax < *poolStartMin {
		fmt.Fprintln(stderr, "fleetq simulate: --pool-start-min must be above 0 and at most --pool-start-max")
		return 2
	}
	if *bridge < 0 {
		fmt.Fprintln(stderr, "fleetq simulate: --bridge must be a pool size >= 0")
		return 2
	}
	if st := *bridgeState; st != "" && st != fleetconfig.WarmPoolStopped && st != fleetconfig.WarmPoolHibernated {
		fmt.Fprintf(stderr, "fleetq simulate: --bridge-state must be %s or %s, got %q\n", fleetconfig.WarmPoolStopped, fleetconfig.WarmPoolHibernated, st)
		return 2
	}
	if *forecastBudget < 0 {
		fmt.Fprintln(stderr, "fleetq simulate: --forecast must be a budget of GPU-hours a day >= 0")
		return 2
	}
	if *forecastBudget > 0 {
		o.Forecast = fleetconfig.Forecast{Enabled: true, BudgetGPUHoursPerDay: *forecastBudget}
	}
	if *configFile != "" {
		cfg, err := fleetconfig.Load(*configFile)
		if err != nil {
			fmt.Fprintln(stderr, "fleetq simulate:", err)
			return 2
		}
		f := &cfg.Fleets[0]
		if *fleetSlug != "" {
			var ok bool
			if f, ok = cfg.Fleet(*fleetSlug); !ok {
				fmt.Fprintf(stderr, "fleetq simulate: %s has no fleet %q\n", *configFile, *fleetSlug)
				return 2
			}
		}
		o.Fleet = f
	}
	if most := fleetMax(w, o); *spotPool > most {
		fmt.Fprintf(stderr, "fleetq simulate: --spot-pool %d is more than the fleet's max instances (%d)\n", *spotPool, most)
		return 2
	}
	r, err := sim.Simulate(w, strings.Split(*policy, ","), o)
	if err != nil {
		fmt.Fprintln(stderr, "fleetq simulate:", err)
		return 2
	}
	if *asJSON {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteTable(stdout)
	}
	if err == nil && *plotFile != "" {
		err = writePlot(r, *plotFile)
	}
	if err == nil && *paretoFile != "" {
		err = writePareto(w, r, o, *paretoFile)
	}
	if err != nil {
		fmt.Fprintln(stderr, "fleetq simulate:", err)
		return 1
	}
	return 0
}

// fleetMax is the simulated fleet's max instances: the --config fleet's,
// else the workload's.
func fleetMax(w sim.Workload, o sim.Options) int {
	if o.Fleet != nil && o.Fleet.MaxInstances > 0 {
		return o.Fleet.MaxInstances
	}
	return w.MaxInstances
}

func pairList(ps []scaling.Pair) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.InstanceType+"@"+p.Zone)
	}
	return strings.Join(out, ",")
}

func loadWorkload(name string, seed uint64, days int) (sim.Workload, error) {
	if strings.HasSuffix(strings.ToLower(name), ".csv") {
		f, err := os.Open(name)
		if err != nil {
			return sim.Workload{}, err
		}
		defer f.Close()
		return sim.LoadCSV(name, f)
	}
	return sim.BuiltIn(name, seed, days)
}

func writePlot(r sim.Report, name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := r.WritePlot(f, name); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writePareto draws the report's policies and, beside them, fleetq with
// one, two and four warm spare instances from 08:00 to 22:00.
func writePareto(w sim.Workload, r sim.Report, o sim.Options, name string) error {
	points := slices.Clone(r.Results)
	for _, spare := range []int{1, 2, 4} {
		ww, err := fleetconfig.ParseWarmWindow(fmt.Sprintf("08:00-22:00,spare=%d", spare))
		if err != nil {
			return err
		}
		wo := o
		wo.Warm = append(slices.Clone(o.Warm), ww)
		wr, err := sim.Simulate(w, []string{"fleetq"}, wo)
		if err != nil {
			return err
		}
		res := wr.Results[0]
		res.Policy = fmt.Sprintf("fleetq warm spare=%d", spare)
		points = append(points, res)
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := sim.WritePareto(f, name, fmt.Sprintf("%s (seed %d): GPU-hours against p95 wait", r.Workload, r.Seed), points); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
