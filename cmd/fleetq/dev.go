//go:build !agent

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/lib/logging"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

func init() {
	register("dev", "run the control plane locally (embedded DynamoDB and SQS, the API, dispatch)", runDev)
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetq dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address the API listens on")
	secret := fs.String("fleet-secret", "", "the secret workers started by hand register with, for each fleet whose config sets accept_secret (random per fleet and printed when empty); local instances attest instead")
	operator := fs.String("operator-token", "", "operator bearer token for producer and admin routes (random and printed when empty)")
	configFile := fs.String("config", "", "fleet config file (default: the built-in config/dev.yaml)")
	registerLimit := fs.Int("register-limit", 10, "worker registrations allowed per minute per source address")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error (the demo defaults to warn)")
	noLocalFleet := fs.Bool("no-local-fleet", false, "start no local fleet: bring your own workers (the scaler's decisions are advisory)")
	tick := fs.Duration("tick", time.Minute, "how often the scaler runs (the demo defaults to 5s)")
	bootDelay := fs.Duration("boot-delay", 20*time.Second, "how long a local instance takes to start its worker (the demo defaults to 8s)")
	idleWindow := fs.Duration("idle-window", 0, "override every fleet's idle window (the demo defaults to 20s)")
	spotRate := fs.Float64("spot-rate", 0, "interrupt local instances at random, per instance-hour, through the Spot warning path")
	demo := fs.Bool("demo", false, "run the demo: a burst of demo-sleep jobs on an empty fleet, a live table while it scales 0 → N → 0, a summary; then exit")
	jobs := fs.Int("jobs", 16, "jobs the demo submits")
	chaos := fs.Float64("chaos", 0, "fail this share (0..1) of DynamoDB and SQS calls at random: throttling, 500, 503, latency, resets before and after the write; the faults are counted at shutdown")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fleetq dev [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Runs the whole control plane on this machine, on loopback. Set FLEETQ_DYNAMODB_ENDPOINT")
		fmt.Fprintln(stderr, "or FLEETQ_SQS_ENDPOINT to use DynamoDB Local, LocalStack or AWS instead of the embedded servers.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *demo {
		if *noLocalFleet {
			fmt.Fprintln(stderr, "fleetq dev: --demo needs the local fleet")
			return 2
		}
		if !set["tick"] {
			*tick = 5 * time.Second
		}
		if !set["boot-delay"] {
			*bootDelay = 8 * time.Second
		}
		if !set["idle-window"] {
			*idleWindow = 20 * time.Second
		}
		if !set["log-level"] {
			*logLevel = "warn"
		}
		if !set["addr"] {
			*addr = "127.0.0.1:0"
		}
	}
	cfg := fleetconfig.Default()
	if *configFile != "" {
		var err error
		if cfg, err = fleetconfig.Load(*configFile); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if *idleWindow > 0 {
		// A development override below the config's 1-minute floor: the
		// scale-in grace shrinks with it so idle workers can leave in time.
		for i := range cfg.Fleets {
			f := &cfg.Fleets[i]
			f.IdleWindow = fleetconfig.Duration(*idleWindow)
			f.ScaleInGrace = fleetconfig.Duration(min(f.ScaleInGrace.Std(), *idleWindow/4))
		}
	}
	if *chaos < 0 || *chaos > 1 {
		fmt.Fprintln(stderr, "fleetq dev: --chaos must be between 0 and 1")
		return 2
	}
	log, err := logging.New(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	fo := devstack.FleetOptions{Tick: *tick, NoLocalFleet: *noLocalFleet, LocalAgents: !*noLocalFleet, BootDelay: *bootDelay, SpotRate: *spotRate}
	stack, err := devstack.Start(ctx, devstack.Options{
		Addr: *addr, Config: cfg, FleetSecrets: sameSecret(cfg, *secret), OperatorToken: *operator, RegisterLimit: *registerLimit, Logger: log,
		Fleet: fo, Chaos: *chaos,
	})
	if err != nil {
		fmt.Fprintln(stderr, "fleetq dev:", err)
		return 1
	}
	fmt.Fprintf(stdout, "fleetq dev ready at %s  stage=%s  operator-token=%s\n", stack.URL, cfg.Stage, stack.OperatorToken)
	for _, f := range cfg.Fleets {
		if s, ok := stack.FleetSecrets[f.Slug]; ok {
			fmt.Fprintf(stdout, "  fleet %s: fleet-secret=%s\n", f.Slug, s)
		}
	}
	fmt.Fprintf(stdout, "operator console: fleetq console --api %s --operator-token %s --open\n", stack.URL, stack.OperatorToken)
	devStateNote(stdout, set["operator-token"], set["fleet-secret"])
	if len(cfg.Webhooks.AllowedHosts) > 0 {
		fmt.Fprintf(stdout, "job callbacks signed with webhook-key=%s (Fleetq-Key-Id %s)\n", stack.WebhookKey, signing.KeyID(stack.WebhookKey))
	}
	if *demo {
		return runDemo(ctx, stack, *jobs, stdout, stderr)
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "fleetq dev: shutting down")
	if f := stack.ChaosFaults(); f != nil {
		fmt.Fprintf(stdout, "fleetq dev: chaos injected DynamoDB faults %v, SQS faults %v\n", f["dynamodb"], f["sqs"])
	}
	if err := stack.Close(); err != nil {
		fmt.Fprintln(stderr, "fleetq dev:", err)
		return 1
	}
	return 0
}

// runDemo runs the dev stack's demo and prints its summary; the exit code
// says whether nothing was lost and no busy worker was killed.
func runDemo(ctx context.Context, stack *devstack.Stack, jobs int, stdout, stderr io.Writer) int {
	defer stack.Close()
	live := false
	if f, ok := stdout.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			live = true
		}
	}
	sum, err := stack.RunDemo(ctx, devstack.DemoOptions{Jobs: jobs, Out: stdout, Live: live})
	fmt.Fprintf(stdout, "\nsummary: %s\n", sum)
	if err != nil {
		fmt.Fprintln(stderr, "fleetq dev --demo:", err)
		return 1
	}
	if sum.Lost != 0 || sum.KilledBusy != 0 {
		return 1
	}
	return 0
}

// sameSecret gives secret to every fleet that accepts one (nil when empty:
// the dev stack generates one per fleet).
func sameSecret(cfg *fleetconfig.Config, secret string) map[string]string {
	if secret == "" {
		return nil
	}
	out := map[string]string{}
	for _, f := range cfg.Fleets {
		if f.AcceptSecret {
			out[f.Slug] = secret
		}
	}
	return out
}

// devStateNote tells what a restart of the dev stack loses, and, unless
// both are given, how to keep the operator token and the fleets' secrets
// the same from one start to the next.
func devStateNote(w io.Writer, pinnedToken, pinnedSecret bool) {
	fmt.Fprintln(w, "state: in memory (jobs, workers, API keys, the scaler's decisions), lost when fleetq dev stops")
	if pinnedToken && pinnedSecret {
		return
	}
	fmt.Fprintln(w, "the operator token and the fleet secrets are new at every start; pin them with")
	fmt.Fprintln(w, `  --operator-token TOKEN --fleet-secret SECRET (make serve ARGS="--operator-token TOKEN --fleet-secret SECRET")`)
}
