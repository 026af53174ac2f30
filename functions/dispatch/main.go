// Command dispatch is the SQS-triggered function that turns submissions into
// jobs (pkg/dispatch). The event source mapping must enable
// ReportBatchItemFailures so only failed records are redelivered.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetq/fleetq/pkg/dispatch"
	"github.com/fleetq/fleetq/pkg/lambdaenv"
	"github.com/fleetq/fleetq/pkg/scaler"
)

func main() {
	env, err := lambdaenv.Load(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dispatch:", err)
		os.Exit(1)
	}
	st := env.Store()
	groups, err := env.FleetGroups()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dispatch:", err)
		os.Exit(1)
	}
	// Wake on enqueue: a fleet at zero is raised in this invocation.
	waker := &scaler.Waker{Store: st, Capacity: groups, Logger: env.Logger}
	h := &dispatch.Handler{Config: env.Config, Store: st, Waker: waker, Logger: env.Logger}
	lambda.Start(h.Handle)
}
