//go:build !agent

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fleetq/fleetq/pkg/aws/ec2pool"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

func init() {
	register("bench", "measure a stage on your account: bench boot times a Spot pool instance's create, stop and start", runBench)
}

const benchUsage = `usage: fleetq bench <boot> [flags]

  boot --fleet F --launch-template lt-... [--runs N] [--pair type/zone] [--subnet zone=subnet-...]
         create, stop and start N instances of the fleet's Spot pool pairs on your account and
         print how long each phase took (docs/deploy.md, "Measuring a Spot pool instance's boot: fleetq bench boot")
`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && args[0] == "boot":
		return runBenchBoot(ctx, args[1:], stdout, stderr, nil, clock.Real{})
	case len(args) > 0 && (args[0] == "-h" || args[0] == "--help"):
		fmt.Fprint(stdout, benchUsage)
		return 0
	}
	fmt.Fprint(stderr, benchUsage)
	return 2
}

// runBenchBoot parses bench boot's flags and runs it through api (the
// account's EC2 from the AWS configuration when nil).
func runBenchBoot(ctx context.Context, args []string, stdout, stderr io.Writer, api ec2pool.API, clk clock.Clock) int {
	fs := flag.NewFlagSet("bench boot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stage := fs.String("stage", "dev", "stage whose fleet is measured")
	configFile := fs.String("config", "", "fleet config file of the stage (default: the built-in one)")
	fleet := fs.String("fleet", "", "fleet whose Spot pool is measured (required)")
	runs := fs.Int("runs", 3, "how many instances to create, stop and start, one after the other, over the pairs in turn")
	template := fs.String("launch-template", "", "the fleet's launch template id, lt-... (the Spot group's; required)")
	var pairs, subnets listFlag
	fs.Var(&pairs, "pair", "an instance type and zone to measure, type/zone (repeatable; default: the fleet's spot_pool pairs)")
	fs.Var(&subnets, "subnet", "the fleet's subnet in a zone, zone=subnet-... (repeatable; default: none, the account's default VPC)")
	volume := fs.Int("volume-gb", 0, "root volume of each instance (default: the fleet's spot_pool volume_gb)")
	interval := fs.Duration("interval", 2*time.Second, "time between two looks at an instance's state")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on one phase after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *fleet == "" || *template == "" || *runs < 1 {
		fmt.Fprintln(stderr, "fleetq bench boot: --fleet and --launch-template are required, and --runs must be at least 1")
		return 2
	}
	cfg, err := stageConfig(*stage, *configFile)
	if err != nil {
		fmt.Fprintln(stderr, "fleetq bench boot:", err)
		return 2
	}
	f, ok := cfg.Fleet(*fleet)
	if !ok {
		fmt.Fprintf(stderr, "fleetq bench boot: stage %s has no fleet %q\n", *stage, *fleet)
		return 2
	}
	b := bootBench{clk: clk, interval: *interval, timeout: *timeout, volumeGB: *volume, out: stdout}
	if b.volumeGB == 0 {
		b.volumeGB = f.SpotPool.VolumeGB
	}
	for _, p := range pairs {
		typ, zone, ok := strings.Cut(p, "/")
		if !ok || typ == "" || zone == "" {
			fmt.Fprintf(stderr, "fleetq bench boot: --pair %q is not type/zone\n", p)
			return 2
		}
		b.pairs = append(b.pairs, scaling.Pair{InstanceType: typ, Zone: zone})
	}
	if len(b.pairs) == 0 {
		for _, p := range f.SpotPool.Pairs {
			b.pairs = append(b.pairs, scaling.Pair{InstanceType: p.InstanceType, Zone: p.Zone})
		}
	}
	if len(b.pairs) == 0 {
		fmt.Fprintf(stderr, "fleetq bench boot: fleet %s has no spot_pool pairs: pass --pair type/zone\n", *fleet)
		return 2
	}
	if api == nil {
		awsCfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "fleetq bench boot: AWS configuration:", err)
			return 1
		}
		api = ec2.NewFromConfig(awsCfg)
	}
	// The instances are tagged as a bench's (fleet bench-<fleet>), not as
	// the fleet's pool: the scaler neither counts nor ends them.
	b.pool = ec2pool.Pool{EC2: api, Stage: cfg.Stage, Fleet: "bench-" + f.Slug, LaunchTemplateID: *template}
	for _, s := range subnets {
		zone, id, ok := strings.Cut(s, "=")
		if !ok {
			fmt.Fprintf(stderr, "fleetq bench boot: --subnet %q is not zone=subnet-...\n", s)
			return 2
		}
		if b.pool.Subnets == nil {
			b.pool.Subnets = map[string]string{}
		}
		b.pool.Subnets[zone] = id
	}
	if err := b.run(ctx, *runs); err != nil {
		fmt.Fprintln(stderr, "fleetq bench boot:", err)
		return 1
	}
	return 0
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// bootBench times the phases of Spot pool instances: create (launch to
// running), stop (to stopped) and start (to running again).
type bootBench struct {
	pool              ec2pool.Pool
	pairs             []scaling.Pair
	volumeGB          int
	clk               clock.Clock
	interval, timeout time.Duration
	out               io.Writer
}

// The phases bench boot times, in order.
var benchPhases = []string{"create", "stop", "start"}

// run measures runs instances one after the other, each ended after its
// run, prints each run's phases, then each phase's fastest, median and
// slowest.
func (b bootBench) run(ctx context.Context, runs int) error {
	took := map[string][]time.Duration{}
	noCapacity := 0
	for i := range runs {
		pair := b.pairs[i%len(b.pairs)]
		phases, err := b.one(ctx, pair)
		var parts []string
		for _, name := range benchPhases {
			if d, ok := phases[name]; ok {
				took[name] = append(took[name], d)
				parts = append(parts, fmt.Sprintf("%s %.1fs", name, d.Seconds()))
			}
		}
		switch {
		case errors.Is(err, ec2pool.ErrNoCapacity):
			noCapacity++
			parts = append(parts, "no Spot capacity")
		case err != nil:
			return fmt.Errorf("run %d (%s): %w", i+1, pair, err)
		}
		fmt.Fprintf(b.out, "run %d %s: %s\n", i+1, pair, strings.Join(parts, ", "))
	}
	for _, name := range benchPhases {
		d := took[name]
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		fmt.Fprintf(b.out, "%-6s n=%d  min %.1fs  median %.1fs  max %.1fs\n", name, len(d), d[0].Seconds(), d[len(d)/2].Seconds(), d[len(d)-1].Seconds())
	}
	if noCapacity > 0 {
		fmt.Fprintf(b.out, "%d of %d runs met no Spot capacity\n", noCapacity, runs)
	}
	return nil
}

// one creates an instance of the pair, waits for it to run, stops it,
// starts it again, and ends it whatever happened; it answers the phases it
// timed.
func (b bootBench) one(ctx context.Context, pair scaling.Pair) (map[string]time.Duration, error) {
	phases := map[string]time.Duration{}
	t0 := b.clk.Now()
	in, err := b.pool.Create(ctx, pair, b.volumeGB, "")
	if err != nil {
		return phases, err
	}
	defer func() { _ = b.pool.End(context.WithoutCancel(ctx), in.ID) }()
	timed := func(name string, start time.Time, act func() error, want string) error {
		if err := act(); err != nil {
			return err
		}
		if err := b.await(ctx, in.ID, want); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		phases[name] = b.clk.Now().Sub(start)
		return nil
	}
	if err := timed("create", t0, func() error { return nil }, "running"); err != nil {
		return phases, err
	}
	if err := timed("stop", b.clk.Now(), func() error { return b.pool.Stop(ctx, in.ID) }, "stopped"); err != nil {
		return phases, err
	}
	if err := timed("start", b.clk.Now(), func() error { return b.pool.Start(ctx, in.ID) }, "running"); err != nil {
		return phases, err
	}
	return phases, nil
}

// await looks at the instance every interval until it is in state want.
func (b bootBench) await(ctx context.Context, id, want string) error {
	deadline := b.clk.Now().Add(b.timeout)
	for {
		all, err := b.pool.Describe(ctx)
		if err != nil {
			return err
		}
		for _, in := range all {
			if in.ID == id && in.State == want {
				return nil
			}
		}
		if !b.clk.Now().Before(deadline) {
			return fmt.Errorf("instance %s not %s after %s", id, want, b.timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.clk.After(b.interval):
		}
	}
}
