// Command interruption is the EventBridge-triggered function for the EC2
// Spot interruption warnings, rebalance recommendations, instance state
// changes and Auto Scaling terminate lifecycle actions of the stage's
// fleets (pkg/service/interruption, built by pkg/service/system).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetq/fleetq/pkg/service/system"
)

func main() {
	env, err := system.LoadLambda(context.Background(), os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "interruption:", err)
		os.Exit(1)
	}
	lambda.Start(env.InterruptionHandler())
}
