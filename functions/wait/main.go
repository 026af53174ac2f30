// Command wait serves the API's wait route (GET /api/jobs/{job_id}/wait)
// behind API Gateway with the API's own handler, built by
// pkg/service/system/apifn, on a function whose reserved concurrency caps
// the waits held at once, so that they never take the API function's.
package main

import (
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/apifn"
)

func main() { system.StartLambda(apifn.WaitFunction) }
