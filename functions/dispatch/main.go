// Command dispatch is the SQS-triggered function that turns submissions into
// jobs and wakes a fleet at zero (pkg/service/dispatch, built by pkg/service/system/dispatchfn). The
// event source mapping must enable ReportBatchItemFailures so only failed
// records are redelivered.
package main

import (
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/dispatchfn"
)

func main() { system.StartLambda(dispatchfn.Function) }
