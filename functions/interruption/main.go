// Command interruption is the EventBridge-triggered function for the EC2
// Spot interruption warnings, rebalance recommendations, instance state
// changes and Auto Scaling terminate lifecycle actions of the stage's
// fleets (pkg/service/interruption, built by pkg/service/system/interruptionfn).
package main

import (
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/interruptionfn"
)

func main() { system.StartLambda(interruptionfn.Function) }
