// Command scaler is the once-a-minute EventBridge-scheduled function that
// runs pkg/service/scaler's tick over every fleet of the stage (built by
// pkg/service/system/scalerfn): housekeeping of the job records, the scaling decision carried
// out on the fleet's Auto Scaling Group, the decision record, and one
// Embedded Metric Format line per fleet on stdout (CloudWatch Logs turns
// them into metrics).
package main

import (
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/scalerfn"
)

func main() { system.StartLambda(scalerfn.Function) }
