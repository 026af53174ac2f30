package interruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// Store is what the handler needs of the store.
type Store interface {
	WorkerByInstance(ctx context.Context, instanceID string) (worker.Worker, error)
	DrainWorker(ctx context.Context, id string) (worker.Worker, error)
	RequeueWorkerLeases(ctx context.Context, workerID, reason string) (int, error)
	RemoveWorker(ctx context.Context, id, reason string) (int, error)
	RecordInterruption(ctx context.Context, in fleetstate.Interruption) (bool, error)
}

// Lifecycle completes Auto Scaling lifecycle actions (pkg/aws/asg's Adapter). An
// action no longer waiting is reported as asg.ErrNoActiveLifecycleAction.
type Lifecycle interface {
	CompleteLifecycle(ctx context.Context, groupName, hookName, instanceID, token string) error
}

// NoAutoScaling is the Lifecycle of a stack without Auto Scaling groups (the
// dev stack's local fleet): it completes nothing, and the handler notes that
// the lifecycle action, if any, times out on its own.
var NoAutoScaling Lifecycle = noAutoScaling{}

type noAutoScaling struct{}

// errNoAutoScaling is NoAutoScaling's answer.
var errNoAutoScaling = errors.New("no auto scaling group here")

func (noAutoScaling) CompleteLifecycle(context.Context, string, string, string, string) error {
	return errNoAutoScaling
}

// Handler handles one event at a time. Build it with New; the fields are
// exported for callers that still build it as a literal, where a nil
// Lifecycle is NoAutoScaling and a nil Clock the wall clock.
type Handler struct {
	Store     Store
	Lifecycle Lifecycle
	// Clock dates an event that carries no time.
	Clock  clock.Clock
	Logger *slog.Logger
}

// New returns a handler over the store. lifecycle completes terminate
// lifecycle actions (NoAutoScaling where there is no group); clk dates events
// that carry no time; log may be nil (slog's default). store, lifecycle and
// clk are required: New panics without them.
func New(store Store, lifecycle Lifecycle, clk clock.Clock, log *slog.Logger) *Handler {
	if store == nil || lifecycle == nil || clk == nil {
		panic("interruption.New: store, lifecycle and clock are required")
	}
	return &Handler{Store: store, Lifecycle: lifecycle, Clock: clk, Logger: log}
}

// Summary is what the handler did.
type Summary struct {
	Event      string `json:"event"`
	Kind       Kind   `json:"kind,omitempty"`
	InstanceID string `json:"instance_id"`
	WorkerID   string `json:"worker_id,omitempty"`
	Drained    bool   `json:"drained,omitempty"`
	Requeued   int    `json:"requeued"`
	Removed    bool   `json:"removed,omitempty"`
	Completed  bool   `json:"lifecycle_completed,omitempty"`
	Note       string `json:"note,omitempty"`
}

// Handle handles one EventBridge event: it parses the detail into its
// message, looks up the action of the message's kind, and runs it. An event
// it cannot parse (ErrUnsupported, ErrMalformed) changes nothing.
func (h *Handler) Handle(ctx context.Context, ev events.CloudWatchEvent) (Summary, error) {
	s := Summary{Event: ev.DetailType}
	msg, err := Parse(ev)
	if err != nil {
		return s, err
	}
	s.Kind, s.InstanceID = msg.Kind(), msg.InstanceID()
	act, ok := actions[msg.Kind()]
	if !ok {
		return s, fmt.Errorf("%w: no action for %s", ErrUnsupported, msg.Kind())
	}
	at := ev.Time
	if at.IsZero() {
		at = h.clock().Now()
	}
	in := input{id: ev.ID, at: at, msg: msg,
		log: h.log().With("event", ev.DetailType, "event_id", ev.ID, "instance_id", s.InstanceID)}
	err = act(ctx, h, in, &s)
	return s, err
}

// input is one parsed event as an action sees it.
type input struct {
	id  string    // the event's id (counts it once)
	at  time.Time // when it happened
	msg Message
	log *slog.Logger
}

// action is what the handler does for one kind of message.
type action func(ctx context.Context, h *Handler, in input, s *Summary) error

// step is one change to the worker on the event's instance.
type step func(ctx context.Context, h *Handler, w worker.Worker, s *Summary) error

// actions maps each kind of message to its action.
var actions = map[Kind]action{
	// Drained and its leases requeued at once: a preemption, no attempt spent.
	KindSpotWarning: onWorker(fleetstate.InterruptSpot, drain, requeue(job.SpotInterruption)),
	// Drained (no new leases); its running jobs go on.
	KindRebalance: onWorker(fleetstate.InterruptRebalance, drain),
	// Its leases requeued and the worker removed.
	KindInstanceEnding: onWorker(fleetstate.InterruptTerminated, remove),
	KindInstanceState:  stateNeedsNothing,
	// Drained, leases requeued, then the action completed with CONTINUE
	// (whether or not a worker ran there).
	KindTerminateAction: then(onWorker("", drain, requeue(job.Shutdown)), completeLifecycle),
}

// onWorker runs steps on the worker of the event's instance, then counts the
// interruption as kind ("" counts nothing). No worker there is a no-op.
func onWorker(kind string, steps ...step) action {
	return func(ctx context.Context, h *Handler, in input, s *Summary) error {
		w, err := h.Store.WorkerByInstance(ctx, s.InstanceID)
		if errors.Is(err, store.ErrNotFound) {
			in.log.Info("no worker on the instance; nothing to do")
			s.Note = "no worker runs on this instance"
			return nil
		}
		if err != nil {
			return err
		}
		s.WorkerID = w.ID
		for _, st := range steps {
			if err := st(ctx, h, w, s); err != nil {
				return err
			}
		}
		if kind != "" && in.id != "" {
			if _, err := h.Store.RecordInterruption(ctx, fleetstate.Interruption{EventID: in.id, Fleet: w.Fleet, Kind: kind,
				InstanceType: w.InstanceType, AZ: w.AZ, At: in.at}); err != nil {
				return err
			}
		}
		in.log.Info("interruption handled", "worker_id", w.ID, "fleet", w.Fleet,
			"drained", s.Drained, "requeued", s.Requeued, "removed", s.Removed)
		return nil
	}
}

// then runs a, then b.
func then(a, b action) action {
	return func(ctx context.Context, h *Handler, in input, s *Summary) error {
		if err := a(ctx, h, in, s); err != nil {
			return err
		}
		return b(ctx, h, in, s)
	}
}

// drain stops the worker taking new leases.
func drain(ctx context.Context, h *Handler, w worker.Worker, s *Summary) error {
	if _, err := h.Store.DrainWorker(ctx, w.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s.Drained = true
	return nil
}

// requeue puts the worker's leased jobs back in the queue for reason.
func requeue(reason job.PreemptReason) step {
	return func(ctx context.Context, h *Handler, w worker.Worker, s *Summary) error {
		n, err := h.Store.RequeueWorkerLeases(ctx, w.ID, string(reason))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		s.Requeued = n
		return nil
	}
}

// remove requeues the worker's leases and deletes the worker.
func remove(ctx context.Context, h *Handler, w worker.Worker, s *Summary) error {
	n, err := h.Store.RemoveWorker(ctx, w.ID, string(job.Shutdown))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s.Requeued, s.Removed = n, err == nil
	return nil
}

// stateNeedsNothing notes a state change that ends nothing.
func stateNeedsNothing(_ context.Context, _ *Handler, in input, s *Summary) error {
	state := ""
	if m, ok := in.msg.(InstanceStateChange); ok {
		state = m.State
	}
	s.Note = "state " + state + " needs nothing"
	return nil
}

// completeLifecycle completes the terminate lifecycle action with CONTINUE.
// An action no longer waiting (a duplicate delivery: completed already, or
// timed out) is done too.
func completeLifecycle(ctx context.Context, h *Handler, in input, s *Summary) error {
	m, ok := in.msg.(TerminateLifecycleAction)
	if !ok {
		return fmt.Errorf("complete lifecycle action: %s is not a %s", in.msg.Kind(), KindTerminateAction)
	}
	lc := h.Lifecycle
	if lc == nil {
		lc = NoAutoScaling
	}
	err := lc.CompleteLifecycle(ctx, m.Group, m.Hook, m.Instance, m.Token)
	switch {
	case errors.Is(err, errNoAutoScaling):
		s.Note = "no Auto Scaling group here: the lifecycle action times out on its own"
	case errors.Is(err, asg.ErrNoActiveLifecycleAction):
		s.Note = "lifecycle action already completed"
	case err != nil:
		return fmt.Errorf("complete lifecycle action of %s: %w", m.Instance, err)
	default:
		s.Completed = true
	}
	return nil
}

func (h *Handler) clock() clock.Clock {
	if h.Clock != nil {
		return h.Clock
	}
	return clock.Real{}
}

func (h *Handler) log() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}
