// Command api is the worker, producer and operator HTTP API as a Lambda
// function behind an API Gateway HTTP API (payload format 2.0). pkg/service/system
// builds it, with the same constructor the dev stack serves.
package main

import (
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/service/system"
)

func main() { system.StartLambda(awsenv.API) }
