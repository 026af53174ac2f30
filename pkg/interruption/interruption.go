// Package interruption handles the EC2 and Auto Scaling events that end or
// threaten a fleet's instances, so that no interruption costs a job or an
// attempt even when the instance's agent cannot act (a hung box, a killed
// process):
//
//   - EC2 Spot Instance Interruption Warning: the worker is drained and its
//     leases are requeued at once (a preemption, no attempt spent);
//   - EC2 Instance Rebalance Recommendation: the worker is drained (no new
//     leases); its running jobs go on;
//   - EC2 Instance State-change Notification (shutting-down, terminated):
//     its leases are requeued and the worker removed;
//   - EC2 Instance-terminate Lifecycle Action: drained, leases requeued,
//     then the lifecycle action is completed with CONTINUE.
//
// Every step is idempotent and safe under duplicate or out-of-order
// delivery; a race with the agent's own requeue is settled by the lease
// token (one of them moves the job, the other finds the lease gone). An
// event for an instance no worker runs on is a logged no-op.
package interruption

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/fleetstate"
	"github.com/fleetq/fleetq/pkg/job"
	"github.com/fleetq/fleetq/pkg/store"
	"github.com/fleetq/fleetq/pkg/worker"
)

// Detail types handled.
const (
	SpotWarning   = "EC2 Spot Instance Interruption Warning"
	Rebalance     = "EC2 Instance Rebalance Recommendation"
	StateChange   = "EC2 Instance State-change Notification"
	TerminateHook = "EC2 Instance-terminate Lifecycle Action"
)

// Store is what the handler needs of the store.
type Store interface {
	WorkerByInstance(ctx context.Context, instanceID string) (worker.Worker, error)
	DrainWorker(ctx context.Context, id string) (worker.Worker, error)
	RequeueWorkerLeases(ctx context.Context, workerID, reason string) (int, error)
	RemoveWorker(ctx context.Context, id, reason string) (int, error)
	RecordInterruption(ctx context.Context, in fleetstate.Interruption) (bool, error)
}

// Lifecycle completes Auto Scaling lifecycle actions (pkg/asg's Adapter).
type Lifecycle interface {
	CompleteLifecycle(ctx context.Context, groupName, hookName, instanceID, token string) error
}

// Handler handles one event at a time.
type Handler struct {
	Store Store
	// Lifecycle, when nil, leaves lifecycle actions to time out (the dev
	// stack has no Auto Scaling group).
	Lifecycle Lifecycle
	Logger    *slog.Logger
}

// Summary is what the handler did.
type Summary struct {
	Event      string `json:"event"`
	InstanceID string `json:"instance_id"`
	WorkerID   string `json:"worker_id,omitempty"`
	Drained    bool   `json:"drained,omitempty"`
	Requeued   int    `json:"requeued"`
	Removed    bool   `json:"removed,omitempty"`
	Completed  bool   `json:"lifecycle_completed,omitempty"`
	Note       string `json:"note,omitempty"`
}

type ec2Detail struct {
	InstanceID string `json:"instance-id"`
	State      string `json:"state"`
}

type hookDetail struct {
	Token      string `json:"LifecycleActionToken"`
	Group      string `json:"AutoScalingGroupName"`
	Hook       string `json:"LifecycleHookName"`
	InstanceID string `json:"EC2InstanceId"`
	Transition string `json:"LifecycleTransition"`
}

// ErrUnsupported is an event this handler has no rule for.
var ErrUnsupported = errors.New("unsupported event")

// Handle handles one EventBridge event.
func (h *Handler) Handle(ctx context.Context, ev events.CloudWatchEvent) (Summary, error) {
	s := Summary{Event: ev.DetailType}
	switch ev.DetailType {
	case SpotWarning, Rebalance, StateChange:
		var d ec2Detail
		if err := json.Unmarshal(ev.Detail, &d); err != nil || d.InstanceID == "" {
			return s, fmt.Errorf("%s: detail has no instance-id", ev.DetailType)
		}
		s.InstanceID = d.InstanceID
		if ev.DetailType == StateChange && d.State != "shutting-down" && d.State != "terminated" {
			s.Note = "state " + d.State + " needs nothing"
			return s, nil
		}
		return h.onInstance(ctx, ev, s)
	case TerminateHook:
		var d hookDetail
		if err := json.Unmarshal(ev.Detail, &d); err != nil || d.InstanceID == "" {
			return s, fmt.Errorf("%s: detail has no EC2InstanceId", ev.DetailType)
		}
		s.InstanceID = d.InstanceID
		s, err := h.onInstance(ctx, ev, s)
		if err != nil {
			return s, err
		}
		if h.Lifecycle == nil {
			s.Note = "no Auto Scaling group here: the lifecycle action times out on its own"
			return s, nil
		}
		if err := h.Lifecycle.CompleteLifecycle(ctx, d.Group, d.Hook, d.InstanceID, d.Token); err != nil {
			if strings.Contains(err.Error(), "No active Lifecycle Action") {
				// A duplicate delivery: the action was completed (or timed out).
				s.Note = "lifecycle action already completed"
				return s, nil
			}
			return s, fmt.Errorf("complete lifecycle action of %s: %w", d.InstanceID, err)
		}
		s.Completed = true
		return s, nil
	default:
		return s, fmt.Errorf("%w: %s %q", ErrUnsupported, ev.Source, ev.DetailType)
	}
}

// onInstance applies the event's rule to the worker on the instance.
func (h *Handler) onInstance(ctx context.Context, ev events.CloudWatchEvent, s Summary) (Summary, error) {
	log := h.log().With("event", ev.DetailType, "event_id", ev.ID, "instance_id", s.InstanceID)
	w, err := h.Store.WorkerByInstance(ctx, s.InstanceID)
	if errors.Is(err, store.ErrNotFound) {
		log.Info("no worker on the instance; nothing to do")
		s.Note = "no worker runs on this instance"
		return s, nil
	}
	if err != nil {
		return s, err
	}
	s.WorkerID = w.ID
	log = log.With("worker_id", w.ID, "fleet", w.Fleet)
	at := ev.Time
	if at.IsZero() {
		at = time.Now()
	}
	count := func(kind string) error {
		if ev.ID == "" {
			return nil
		}
		_, err := h.Store.RecordInterruption(ctx, fleetstate.Interruption{EventID: ev.ID, Fleet: w.Fleet, Kind: kind, InstanceType: w.InstanceType, AZ: w.AZ, At: at})
		return err
	}
	drain := func() error {
		if _, err := h.Store.DrainWorker(ctx, w.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		s.Drained = true
		return nil
	}
	switch ev.DetailType {
	case SpotWarning:
		if err := drain(); err != nil {
			return s, err
		}
		if s.Requeued, err = h.Store.RequeueWorkerLeases(ctx, w.ID, string(job.SpotInterruption)); err != nil && !errors.Is(err, store.ErrNotFound) {
			return s, err
		}
		if err := count(fleetstate.InterruptSpot); err != nil {
			return s, err
		}
	case Rebalance:
		if err := drain(); err != nil {
			return s, err
		}
		if err := count(fleetstate.InterruptRebalance); err != nil {
			return s, err
		}
	case StateChange:
		n, err := h.Store.RemoveWorker(ctx, w.ID, string(job.Shutdown))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return s, err
		}
		s.Requeued, s.Removed = n, err == nil
		if err := count(fleetstate.InterruptTerminated); err != nil {
			return s, err
		}
	case TerminateHook:
		if err := drain(); err != nil {
			return s, err
		}
		if s.Requeued, err = h.Store.RequeueWorkerLeases(ctx, w.ID, string(job.Shutdown)); err != nil && !errors.Is(err, store.ErrNotFound) {
			return s, err
		}
	}
	log.Info("interruption handled", "drained", s.Drained, "requeued", s.Requeued, "removed", s.Removed)
	return s, nil
}

func (h *Handler) log() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}
