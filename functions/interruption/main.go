// Command interruption is the EventBridge-triggered function for the EC2
// Spot interruption warnings, rebalance recommendations, instance state
// changes and Auto Scaling terminate lifecycle actions of the stage's
// fleets (pkg/interruption).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetq/fleetq/pkg/asg"
	"github.com/fleetq/fleetq/pkg/clock"
	"github.com/fleetq/fleetq/pkg/interruption"
	"github.com/fleetq/fleetq/pkg/lambdaenv"
)

func main() {
	env, err := lambdaenv.Load(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "interruption:", err)
		os.Exit(1)
	}
	h := interruption.New(env.Store(), asg.New(env.AutoScaling(), asg.Options{}), clock.Real{}, env.Logger)
	lambda.Start(h.Handle)
}
