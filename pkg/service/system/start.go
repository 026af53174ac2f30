package system

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/runtimeapi"
)

// Function is one Lambda function: its name, which says the variables it
// reads, and how its handler is built from its Lambda. Each function's
// package under pkg/service/system (apifn, dispatchfn, scalerfn,
// interruptionfn) declares its own, so that its main links only the
// services it calls.
type Function struct {
	Name awsenv.Function
	// Handler builds the handler lambda.Start is given. metrics receives
	// the scaler's metric lines (stdout in Lambda); the other functions
	// write none.
	Handler func(l *Lambda, metrics io.Writer) (any, error)
}

// BuildLambda is what every function's main builds: its Lambda from
// getenv and its handler. Logs go to logOut, the scaler's metric lines to
// metrics. Reading a variable awsenv.Vars does not declare for the function
// is an error here, as is any missing or malformed one.
func BuildLambda(ctx context.Context, fn Function, getenv Getenv, metrics, logOut io.Writer) (h any, err error) {
	defer func() {
		if r := recover(); r != nil {
			h, err = nil, fmt.Errorf("%v", r)
		}
	}()
	env, err := LoadLambda(ctx, fn.Name, getenv, logOut)
	if err != nil {
		return nil, err
	}
	return fn.Handler(env, metrics)
}

// StartLambda is a function's main: it builds the function from the
// process environment and hands it to lambda.Start. A function that cannot
// be built reports why through the Runtime API's init-error call, so the
// reason is Lambda's answer to the invocation (not only Runtime.ExitError),
// prints it, and exits.
func StartLambda(fn Function) {
	h, err := BuildLambda(context.Background(), fn, os.Getenv, os.Stdout, os.Stderr)
	if err != nil {
		err = fmt.Errorf("%s: %w", fn.Name, err)
		fmt.Fprintln(os.Stderr, err)
		if api := os.Getenv(runtimeapi.EnvAPI); api != "" {
			if rerr := runtimeapi.ReportInitError(context.Background(), api, err); rerr != nil {
				fmt.Fprintln(os.Stderr, rerr)
			}
		}
		os.Exit(1)
	}
	lambda.Start(h)
}
