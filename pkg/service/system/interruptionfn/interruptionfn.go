// Package interruptionfn builds the interruption function: the EC2 and
// Auto Scaling events that end or threaten instances
// (functions/interruption), and the constructor the dev stack routes the
// same events to.
package interruptionfn

import (
	"context"
	"io"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/service/interruption"
	"github.com/fleetq/fleetq/pkg/service/system"
)

// Function is the interruption function, for system.StartLambda.
var Function = system.Function{Name: awsenv.Interruption, Handler: func(l *system.Lambda, _ io.Writer) (any, error) { return Handler(l) }}

// Handler returns the interruption function's handler, which
// completes lifecycle actions through the Auto Scaling API.
func Handler(e *system.Lambda) (func(context.Context, events.CloudWatchEvent) (interruption.Summary, error), error) {
	h, err := NewInterruption(e.Env, asg.New(e.AutoScaling(), asg.Options{}))
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

// NewInterruption returns the handler of the EC2 and Auto Scaling events
// that end or threaten instances. lifecycle completes terminate lifecycle
// actions.
func NewInterruption(e *system.Env, lifecycle interruption.Lifecycle) (*interruption.Handler, error) {
	return interruption.New(e.Store, lifecycle, e.Clock, e.Logger, interruption.Config{})
}
