// Command dispatch is the SQS-triggered function that turns submissions into
// jobs and wakes a fleet at zero (pkg/service/dispatch, built by pkg/service/system). The
// event source mapping must enable ReportBatchItemFailures so only failed
// records are redelivered.
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
		fmt.Fprintln(os.Stderr, "dispatch:", err)
		os.Exit(1)
	}
	h, err := env.DispatchHandler()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dispatch:", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
