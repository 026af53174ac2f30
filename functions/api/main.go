// Command api is the worker, producer and operator HTTP API as a Lambda
// function behind an API Gateway HTTP API (payload format 2.0). pkg/service/system/apifn
// builds it, with the same constructor the dev stack serves.
package main

import (
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/apifn"
)

func main() { system.StartLambda(apifn.Function) }
