// Command api is the worker, producer and operator HTTP API as a Lambda
// function behind an API Gateway HTTP API (payload format 2.0). pkg/service/system
// builds it, with the same constructor the dev stack serves.
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
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
	h, err := env.APIHandler()
	if err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
