// Package dispatchfn builds the dispatch function: SQS batches of submissions
// turned into jobs (functions/dispatch), and the constructor the dev stack
// builds the same handler with for its event source mapping.
package dispatchfn

import (
	"context"
	"io"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/service/dispatch"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/spotpools"
)

// Function is the dispatch function, for system.StartLambda.
var Function = system.Function{Name: awsenv.Dispatch, Handler: func(l *system.Lambda, _ io.Writer) (any, error) { return Handler(l) }}

// Handler returns the dispatch function's handler, waking the
// fleets' groups of FLEETQ_FLEET_GROUPS and starting the stopped
// instances of the fleets' Spot pools through EC2 (the scaler's
// constructor: spotpools.Capacity) when work arrives.
func Handler(e *system.Lambda) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	groups, err := e.FleetGroups()
	if err != nil {
		return nil, err
	}
	h, err := NewDispatch(e.Env, spotpools.Capacity(groups, spotpools.EC2(e), e.Config))
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

// NewDispatch returns the handler turning submission batches into jobs.
// capacity is the fleets' groups, raised at once when work arrives for a
// fleet at zero; nil leaves the raise to the scaler's next tick (a stack
// without groups).
func NewDispatch(e *system.Env, capacity scaler.Capacity) (*dispatch.Handler, error) {
	var c dispatch.Config
	if capacity != nil {
		w, err := scaler.NewWaker(e.Config, e.Store, capacity, e.Logger, scaler.WakerClock(e.Clock))
		if err != nil {
			return nil, err
		}
		c.Waker = w
	}
	return dispatch.New(e.Config, e.Store, e.Logger, c)
}
