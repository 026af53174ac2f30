package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/fleetq/fleetq/pkg/devstack"
	"github.com/fleetq/fleetq/pkg/fleetconfig"
	"github.com/fleetq/fleetq/pkg/lambdaenv"
)

func init() {
	register("dev", "run the control plane locally (embedded DynamoDB and SQS, the API, dispatch)", runDev)
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetq dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address the API listens on")
	secret := fs.String("fleet-secret", "", "fleet secret workers register with (random and printed when empty)")
	operator := fs.String("operator-token", "", "operator bearer token for producer and admin routes (random and printed when empty)")
	configFile := fs.String("config", "", "fleet config file (default: the built-in config/dev.yaml)")
	registerLimit := fs.Int("register-limit", 10, "worker registrations allowed per minute per source address")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
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
	cfg := fleetconfig.Default()
	if *configFile != "" {
		var err error
		if cfg, err = fleetconfig.Load(*configFile); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	log, err := lambdaenv.NewLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	stack, err := devstack.Start(ctx, devstack.Options{
		Addr: *addr, Config: cfg, FleetSecret: *secret, OperatorToken: *operator, RegisterLimit: *registerLimit, Logger: log,
	})
	if err != nil {
		fmt.Fprintln(stderr, "fleetq dev:", err)
		return 1
	}
	fmt.Fprintf(stdout, "fleetq dev ready at %s  stage=%s  fleet-secret=%s  operator-token=%s\n", stack.URL, cfg.Stage, stack.FleetSecret, stack.OperatorToken)
	<-ctx.Done()
	fmt.Fprintln(stdout, "fleetq dev: shutting down")
	if err := stack.Close(); err != nil {
		fmt.Fprintln(stderr, "fleetq dev:", err)
		return 1
	}
	return 0
}
