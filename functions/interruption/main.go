// Command interruption is the EventBridge-triggered function for the EC2
// Spot interruption warnings, rebalance recommendations, instance state
// changes and Auto Scaling terminate lifecycle actions of the stage's
// fleets (pkg/service/interruption, built by pkg/service/system).
package main

import (
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/service/system"
)

func main() { system.StartLambda(awsenv.Interruption) }
