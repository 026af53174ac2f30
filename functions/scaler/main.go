// Command scaler is the once-a-minute EventBridge-scheduled function that
// runs pkg/scaler's tick over every fleet of the stage: housekeeping of the
// job records, the scaling decision carried out on the fleet's Auto Scaling
// Group, the decision record, and one Embedded Metric Format line per fleet
// on stdout (CloudWatch Logs turns them into metrics).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetq/fleetq/pkg/awsenv"
	"github.com/fleetq/fleetq/pkg/clock"
	"github.com/fleetq/fleetq/pkg/jobevents"
	"github.com/fleetq/fleetq/pkg/lambdaenv"
	"github.com/fleetq/fleetq/pkg/scaler"
)

func main() {
	sc, err := newScaler(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaler:", err)
		os.Exit(1)
	}
	lambda.Start(func(ctx context.Context, _ events.CloudWatchEvent) (map[string]any, error) {
		reports, err := sc.Tick(ctx)
		out := make([]map[string]any, 0, len(reports))
		for _, r := range reports {
			out = append(out, map[string]any{"fleet_slug": r.Fleet, "desired": r.Desired, "reason": r.Decision.Reason})
		}
		return map[string]any{"fleets": out}, err
	})
}

func newScaler(ctx context.Context) (*scaler.Scaler, error) {
	env, err := lambdaenv.Load(ctx, os.Getenv, os.Stderr)
	if err != nil {
		return nil, err
	}
	groups, err := env.FleetGroups()
	if err != nil {
		return nil, err
	}
	st := env.Store()
	sc := &scaler.Scaler{Store: st, Capacity: groups, Clock: clock.Real{}, Logger: env.Logger, Stage: env.Config.Stage, Metrics: os.Stdout}
	if bus := env.Lookup(awsenv.EnvEventBus); bus != "" {
		sc.Relay = &jobevents.Relay{Outbox: st, Publisher: jobevents.EventBridge{Client: env.EventBridge(), Bus: bus}, Logger: env.Logger}
	}
	return sc, nil
}
