// Command scaler is the once-a-minute EventBridge-scheduled function that
// runs pkg/service/scaler's tick over every fleet of the stage (built by
// pkg/service/system): housekeeping of the job records, the scaling decision carried
// out on the fleet's Auto Scaling Group, the decision record, and one
// Embedded Metric Format line per fleet on stdout (CloudWatch Logs turns
// them into metrics).
package main

import (
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/service/system"
)

func main() { system.StartLambda(awsenv.Scaler) }
