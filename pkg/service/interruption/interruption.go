package interruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// Store is what the handler needs of the store. Its calls take the workers
// as the handler holds them, so a Spot warning for n workers holding L
// leases costs at most 1 + 2n + L requests (docs/data-model.md).
type Store interface {
	// Config gives each fleet's drain timeout (agent.drain_timeout).
	Config() *fleetconfig.Config
	WorkersByInstance(ctx context.Context, instanceID string) ([]worker.Worker, error)
	DrainInstance(ctx context.Context, instanceID string) ([]worker.Worker, error)
	RequeueLeasesOf(ctx context.Context, workers []worker.Worker, reason job.Reason, count *fleetstate.Interruption) (int, error)
	RemoveWorkers(ctx context.Context, workers []worker.Worker, reason job.Reason) (int, error)
	RecordInterruption(ctx context.Context, in fleetstate.Interruption) (bool, error)
	StartTermination(ctx context.Context, t worker.Termination) (worker.Termination, bool, error)
	Terminations(ctx context.Context) ([]worker.Termination, error)
	RecordTerminationHeartbeat(ctx context.Context, instanceID string, at time.Time) error
	EndTermination(ctx context.Context, instanceID string) error
}

// Lifecycle completes Auto Scaling lifecycle actions (pkg/aws/asg's Adapter). An
// action no longer waiting is reported as asg.ErrNoActiveLifecycleAction.
type Lifecycle interface {
	CompleteLifecycle(ctx context.Context, groupName, hookName, instanceID, token string) error
}

// Heartbeater is a Lifecycle that can also keep a lifecycle action waiting
// (pkg/aws/asg's Adapter does, with RecordLifecycleActionHeartbeat). Without
// it a held termination relies on the hook's heartbeat timeout being longer
// than the drain.
type Heartbeater interface {
	HeartbeatLifecycle(ctx context.Context, groupName, hookName, instanceID, token string) error
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

// DefaultHeartbeatEvery is how often a held lifecycle action is
// heartbeated: well inside the hook's 300 s heartbeat timeout (infra), so
// that one or two failed sweeps (run once a minute) do not let it lapse.
const DefaultHeartbeatEvery = 2 * time.Minute

// Handler handles one event at a time. Build it with New.
type Handler struct {
	store     Store
	lifecycle Lifecycle
	// clock dates an event that carries no time, and the sweep.
	clock clock.Clock
	log   *slog.Logger
	// heartbeatEvery is how long a held lifecycle action goes without a
	// heartbeat.
	heartbeatEvery time.Duration
}

// Config holds the handler's optional settings; the zero Config is the
// defaults.
type Config struct {
	// HeartbeatEvery is how long a held lifecycle action goes without a
	// heartbeat (default DefaultHeartbeatEvery).
	HeartbeatEvery time.Duration
}

// New returns a handler over the store. lifecycle completes terminate
// lifecycle actions (NoAutoScaling where there is no group); clk dates
// events that carry no time. Every dependency is required: New answers an
// error naming the one missing.
func New(store Store, lifecycle Lifecycle, clk clock.Clock, log *slog.Logger, c Config) (*Handler, error) {
	switch {
	case store == nil:
		return nil, errors.New("interruption.New: no store")
	case lifecycle == nil:
		return nil, errors.New("interruption.New: no lifecycle (NoAutoScaling where there is no group)")
	case clk == nil:
		return nil, errors.New("interruption.New: no clock")
	case log == nil:
		return nil, errors.New("interruption.New: no logger")
	case c.HeartbeatEvery < 0:
		return nil, fmt.Errorf("interruption.New: heartbeat interval %s is negative", c.HeartbeatEvery)
	}
	if c.HeartbeatEvery == 0 {
		c.HeartbeatEvery = DefaultHeartbeatEvery
	}
	return &Handler{store: store, lifecycle: lifecycle, clock: clk, log: log, heartbeatEvery: c.HeartbeatEvery}, nil
}

// Summary is what the handler did.
type Summary struct {
	Event      string `json:"event"`
	Kind       Kind   `json:"kind,omitempty"`
	InstanceID string `json:"instance_id,omitempty"`
	// WorkerID is the first of Workers (by id), kept for readers of one.
	WorkerID string `json:"worker_id,omitempty"`
	// Workers are every worker found on the instance (one per agent).
	Workers   []string `json:"workers,omitempty"`
	Drained   bool     `json:"drained,omitempty"`
	Requeued  int      `json:"requeued"`
	Removed   bool     `json:"removed,omitempty"`
	Completed bool     `json:"lifecycle_completed,omitempty"`
	// HeldUntil is when a held terminate lifecycle action is completed at
	// the latest (RFC 3339): its workers' running jobs may finish until then.
	HeldUntil string `json:"held_until,omitempty"`
	// Terminations is what a sweep did to each held termination.
	Terminations []TerminationSummary `json:"terminations,omitempty"`
	// Outcome is what the handler did with the event, and Note says it
	// for a reader (both set by did).
	Outcome Outcome `json:"outcome,omitempty"`
	// PoolInterrupted: the instance is a fleet's Spot pool instance, marked
	// interrupted.
	PoolInterrupted bool   `json:"pool_interrupted,omitempty"`
	Note            string `json:"note,omitempty"`
}

// Handle handles one EventBridge event: it parses the detail into its
// message, looks up the action of the message's kind, and runs it. An event
// it cannot parse (ErrUnsupported, ErrMalformed) changes nothing. The
// schedule's tick ("Scheduled Event" from aws.events) runs Sweep.
func (h *Handler) Handle(ctx context.Context, ev events.CloudWatchEvent) (Summary, error) {
	s := Summary{Event: ev.DetailType}
	if ev.Source == SourceSchedule && ev.DetailType == ScheduledEvent {
		ts, err := h.Sweep(ctx)
		s.Terminations = ts
		return s, err
	}
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
		at = h.clock.Now()
	}
	in := input{id: ev.ID, at: at, msg: msg,
		log: h.log.With("event", ev.DetailType, "event_id", ev.ID, "instance_id", s.InstanceID)}
	err = act.run(ctx, h, in, &s)
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

// kindAction is a kind's action and what it does, in a line of
// docs/scaling.md's table.
type kindAction struct {
	run  action
	does string
}

// actions maps each kind of message to its action.
var actions = map[Kind]kindAction{
	KindSpotWarning: {markingPool(drainAndRequeue(counted(fleetstate.InterruptSpot), job.SpotInterruption)),
		"drained, leases requeued at once (a preemption: no attempt spent); the work cannot finish in two minutes; counted; an instance of a fleet's Spot pool is marked `interrupted` (no start claims it)"},
	KindReservationWarning: {drainAndRequeue(counted(fleetstate.InterruptReservation), job.Shutdown),
		"the same two minutes from an interruptible Capacity Reservation: drained, leases requeued at once (no attempt spent); counted"},
	KindRebalance: {countOnly(fleetstate.InterruptRebalance),
		"counted only: the group's Capacity Rebalance replaces the instance and terminates it through the terminate hook (see \"One rebalance policy\")"},
	KindTerminateAction: {holdTermination,
		"drained; held while running jobs finish (below), else leases requeued (no attempt) and the action completed"},
	KindTestNotification: {testNotificationNeedsNothing,
		"the group's test notification: logged; nothing else (and no error, so EventBridge does not retry it)"},
	KindInstanceStopping: {drainAndRequeue(notCounted, job.Shutdown),
		"state `stopping`: drained, leases requeued (no attempt); not counted"},
	KindInstanceEnding: {removeWorkers(fleetstate.InterruptTerminated),
		"state `stopped`, `shutting-down`, `terminated`: leases requeued (no attempt), workers removed (an agent that comes back after a stop, a hibernation or a warm pool registers afresh, active); counted"},
	KindInstanceState: {stateNeedsNothing,
		"any other state (the rule does not route them): nothing"},
	KindScheduledChange: {drainScheduled,
		"a scheduled change of EC2 (retirement, maintenance, scheduled stop): every affected instance's workers drained ahead of the date; running jobs finish, then the scaler removes the idle instances; counted"},
	// An error would have Lambda retry an event that can never be handled,
	// then keep it in the failed-events queue and fire its alarms.
	KindNoInstance: {noInstanceNeedsNothing,
		"a scheduled change that names no instance (a Dedicated Host's, whose entity is the host `h-…`, or one with no affected entity): one log line with its event type and entities; nothing else, and no error"},
}

// counting says whether an action counts its event, and as which kind.
type counting struct {
	kind fleetstate.InterruptionKind
	ok   bool
}

// notCounted is an action that counts nothing.
var notCounted = counting{}

// counted counts the event once as kind.
func counted(kind fleetstate.InterruptionKind) counting { return counting{kind: kind, ok: true} }

// of is the count of the event on w's instance, nil when the action counts
// nothing or the event has no id to count it once by.
func (c counting) of(in input, w worker.Worker) *fleetstate.Interruption {
	if !c.ok || in.id == "" {
		return nil
	}
	return &fleetstate.Interruption{EventID: in.id, Fleet: w.Fleet, Kind: c.kind, InstanceType: w.InstanceType, AZ: w.AZ, At: in.at}
}

// record counts the event on w's instance, when c says so. It answers
// false for an event counted before (a redelivery).
func (c counting) record(ctx context.Context, h *Handler, in input, w worker.Worker) (bool, error) {
	n := c.of(in, w)
	if n == nil {
		return true, nil
	}
	return h.store.RecordInterruption(ctx, *n)
}

// drainScheduled drains every worker of every instance an AWS Health
// scheduled change affects, and counts it once.
func drainScheduled(ctx context.Context, h *Handler, in input, s *Summary) error {
	m, ok := in.msg.(ScheduledChange)
	if !ok {
		return fmt.Errorf("scheduled change: %s is not a %s", in.msg.Kind(), KindScheduledChange)
	}
	var all []worker.Worker
	for _, inst := range m.Instances {
		ws, err := h.store.DrainInstance(ctx, inst)
		if err != nil {
			return err
		}
		all = append(all, ws...)
	}
	if len(all) == 0 {
		s.did(OutcomeNoWorker, "no worker runs on these instances")
		return nil
	}
	summarize(all, s)
	s.Drained = true
	first, err := counted(fleetstate.InterruptScheduled).record(ctx, h, in, all[0])
	if err != nil {
		return err
	}
	if !first {
		// Counted after the drain: the first delivery drained them all.
		s.did(OutcomeDuplicate, fmt.Sprintf("%s at %s: drained ahead of it already", m.EventTypeCode, m.StartTime))
		return nil
	}
	s.did(OutcomeDraining, fmt.Sprintf("%s at %s: drained ahead of it", m.EventTypeCode, m.StartTime))
	in.log.Info("scheduled change: instances drained", "code", m.EventTypeCode, "start", m.StartTime,
		"instances", m.Instances, "workers", s.Workers)
	return nil
}

// testNotificationNeedsNothing logs the group's test notification.
func testNotificationNeedsNothing(_ context.Context, _ *Handler, in input, s *Summary) error {
	group := ""
	if m, ok := in.msg.(TestNotification); ok {
		group = m.Group
	}
	s.did(OutcomeIgnored, "test notification of group "+group+": nothing to do")
	in.log.Info("test notification", "group", group)
	return nil
}

// noInstanceNeedsNothing logs an AWS Health scheduled change that names no
// instance, once.
func noInstanceNeedsNothing(_ context.Context, _ *Handler, in input, s *Summary) error {
	m, _ := in.msg.(ScheduledChangeWithoutInstance)
	s.did(OutcomeIgnored, "scheduled change "+m.EventTypeCode+" names no instance: nothing to drain")
	in.log.Info("scheduled change names no instance: nothing to drain", "code", m.EventTypeCode, "entities", m.Entities)
	return nil
}

// summarize names the workers in the summary.
func summarize(ws []worker.Worker, s *Summary) {
	s.WorkerID = ws[0].ID
	for _, w := range ws {
		s.Workers = append(s.Workers, w.ID)
	}
}

// found notes the instance's workers in the summary and answers whether
// there are any; an instance without workers is noted as nothing to do.
func found(in input, s *Summary, ws []worker.Worker) bool {
	if len(ws) == 0 {
		nobody(in, s)
		return false
	}
	summarize(ws, s)
	return true
}

// nobody notes an instance without workers: the action has nothing to do.
func nobody(in input, s *Summary) {
	in.log.Info("no worker on the instance; nothing to do")
	s.did(OutcomeNoWorker, "no worker runs on this instance")
}

// logHandled logs what an action did to the instance's workers.
func logHandled(in input, s *Summary, fleet string) {
	in.log.Info("interruption handled", "workers", s.Workers, "fleet", fleet,
		"drained", s.Drained, "requeued", s.Requeued, "removed", s.Removed)
}

// drainAndRequeue drains every worker of the event's instance, requeues
// their leases for reason and counts the event (in the first requeue's
// write). No worker there is a no-op.
func drainAndRequeue(c counting, reason job.PreemptReason) action {
	return func(ctx context.Context, h *Handler, in input, s *Summary) error {
		ws, err := h.store.DrainInstance(ctx, s.InstanceID)
		if err != nil || !found(in, s, ws) {
			return err
		}
		s.Drained = true
		if s.Requeued, err = h.store.RequeueLeasesOf(ctx, ws, reason.Reason(), c.of(in, ws[0])); err != nil {
			return err
		}
		s.did(OutcomeRequeued, "")
		logHandled(in, s, ws[0].Fleet)
		return nil
	}
}

// PoolMarker is the store of a stage whose fleets may keep a stopped Spot
// pool: it finds an instance's pool and moves its record. A Store that is
// one has the handler mark a pool instance interrupted on a Spot warning.
type PoolMarker interface {
	FindPoolInstance(ctx context.Context, instanceID string) (fleet string, p scaling.PoolInstance, found bool, err error)
	MovePoolInstance(ctx context.Context, fleet, instanceID string, to scaling.PoolState, at time.Time, startFor int) error
}

// markingPool runs act, then marks the event's instance interrupted when
// it is a fleet's Spot pool instance: EC2 stops it after the warning, and
// only EC2 starts it again, so no start of fleetq's claims it.
func markingPool(act action) action {
	return func(ctx context.Context, h *Handler, in input, s *Summary) error {
		if err := act(ctx, h, in, s); err != nil {
			return err
		}
		pm, ok := h.store.(PoolMarker)
		if !ok {
			return nil
		}
		fleet, p, found, err := pm.FindPoolInstance(ctx, s.InstanceID)
		if err != nil || !found {
			return err
		}
		err = pm.MovePoolInstance(ctx, fleet, p.ID, scaling.PoolInterrupted, in.at, 0)
		if errors.Is(err, fault.ErrConflict) {
			return nil // interrupted already, or ended
		}
		if err == nil {
			s.PoolInterrupted = true
			in.log.Info("pool instance interrupted", "fleet", fleet)
		}
		return err
	}
}

// countOnly counts the event on the fleet of the instance's workers and
// changes nothing else.
func countOnly(kind fleetstate.InterruptionKind) action {
	return func(ctx context.Context, h *Handler, in input, s *Summary) error {
		ws, err := h.store.WorkersByInstance(ctx, s.InstanceID)
		if err != nil || !found(in, s, ws) {
			return err
		}
		first, err := counted(kind).record(ctx, h, in, ws[0])
		if err != nil {
			return err
		}
		if !first {
			s.did(OutcomeDuplicate, "counted already")
			return nil
		}
		s.did(OutcomeCounted, "")
		logHandled(in, s, ws[0].Fleet)
		return nil
	}
}

// removeWorkers requeues the leases of the instance's workers and deletes
// them (the instance is gone), then counts the event as kind.
func removeWorkers(kind fleetstate.InterruptionKind) action {
	return func(ctx context.Context, h *Handler, in input, s *Summary) error {
		ws, err := h.store.WorkersByInstance(ctx, s.InstanceID)
		if err != nil || !found(in, s, ws) {
			return err
		}
		if s.Requeued, err = h.store.RemoveWorkers(ctx, ws, job.Shutdown.Reason()); err != nil {
			return err
		}
		s.Removed = true
		if _, err := counted(kind).record(ctx, h, in, ws[0]); err != nil {
			return err
		}
		s.did(OutcomeRemoved, "")
		logHandled(in, s, ws[0].Fleet)
		return nil
	}
}

// stateNeedsNothing notes a state change that ends nothing.
func stateNeedsNothing(_ context.Context, _ *Handler, in input, s *Summary) error {
	state := ""
	if m, ok := in.msg.(InstanceStateChange); ok {
		state = m.State
	}
	s.did(OutcomeIgnored, "state "+state+" needs nothing")
	return nil
}

// holdTermination handles a terminate lifecycle action: every worker on the
// instance is drained; if some still run jobs and their fleet has a drain
// timeout, the action is recorded as a held termination that Sweep ends
// (when the jobs are done, or at the deadline); otherwise the leases are
// requeued (no attempt spent) and the action completed at once.
func holdTermination(ctx context.Context, h *Handler, in input, s *Summary) error {
	m, ok := in.msg.(TerminateLifecycleAction)
	if !ok {
		return fmt.Errorf("terminate lifecycle action: %s is not a %s", in.msg.Kind(), KindTerminateAction)
	}
	// The drain answers each worker with a lease claimed since any read.
	ws, err := h.store.DrainInstance(ctx, m.Instance)
	if err != nil {
		return err
	}
	if len(ws) == 0 {
		nobody(in, s)
	} else {
		summarize(ws, s)
		s.Drained = true
	}
	leases, timeout, fleet := 0, time.Duration(0), ""
	for _, w := range ws {
		leases += w.Leases
		if d := h.drainTimeout(w.Fleet); fleet == "" || d > timeout {
			timeout, fleet = d, w.Fleet
		}
	}
	deadline := in.at.Add(timeout)
	if leases > 0 && timeout > 0 && deadline.After(h.clock.Now()) {
		t, created, err := h.store.StartTermination(ctx, worker.Termination{InstanceID: m.Instance, Fleet: fleet,
			Group: m.Group, Hook: m.Hook, Token: m.Token, StartedAt: in.at, Deadline: deadline, HeartbeatAt: in.at})
		if err != nil {
			return err
		}
		s.HeldUntil = t.Deadline.UTC().Format(time.RFC3339)
		note := fmt.Sprintf("held: %d running jobs may finish until the drain deadline", leases)
		if !created {
			note = "held already: " + note
		}
		in.log.Info("terminate lifecycle action held while the instance drains", "workers", s.Workers,
			"leases", leases, "deadline", s.HeldUntil)
		// A late delivery may find the heartbeat due already.
		ts := h.tend(ctx, t, h.clock.Now())
		if ts.Error != "" {
			return errors.New(ts.Error)
		}
		s.Requeued += ts.Requeued
		s.Completed = (ts.Outcome == OutcomeDrained || ts.Outcome == OutcomeDeadline) && ts.Note == ""
		switch {
		case s.Completed:
			s.did(OutcomeCompleted, note)
		case ts.Outcome == OutcomeLapsed:
			s.did(OutcomeLapsed, note)
		default:
			s.did(OutcomeHeld, note)
		}
		return nil
	}
	n, err := h.store.RequeueLeasesOf(ctx, ws, job.Shutdown.Reason(), nil)
	if err != nil {
		return err
	}
	s.Requeued += n
	note, lapsed, err := h.complete(ctx, m.Group, m.Hook, m.Instance, m.Token)
	if err != nil {
		return err
	}
	s.Completed = note == ""
	switch {
	case s.Completed:
		s.did(OutcomeCompleted, note)
	case lapsed:
		s.did(OutcomeLapsed, note)
	default:
		// No group here to complete it: the leases were requeued, the
		// action times out on its own.
		s.did(OutcomeRequeued, note)
	}
	return nil
}

// drainTimeout is how long a fleet lets running jobs finish when an
// instance is scaled in (agent.drain_timeout; 0 for an unknown fleet).
func (h *Handler) drainTimeout(fleet string) time.Duration {
	cfg := h.store.Config()
	if cfg == nil {
		return 0
	}
	f, ok := cfg.Fleet(fleet)
	if !ok {
		return 0
	}
	return f.Agent.DrainTimeout.Std()
}

// complete completes a lifecycle action with CONTINUE. An action no longer
// waiting (a duplicate delivery: completed already, or timed out) is done
// too, and lapsed; note says why ("" when this call completed it).
func (h *Handler) complete(ctx context.Context, group, hook, instance, token string) (note string, lapsed bool, err error) {
	err = h.lifecycle.CompleteLifecycle(ctx, group, hook, instance, token)
	switch {
	case errors.Is(err, errNoAutoScaling):
		return "no Auto Scaling group here: the lifecycle action times out on its own", false, nil
	case errors.Is(err, asg.ErrNoActiveLifecycleAction):
		return "lifecycle action already completed", true, nil
	case err != nil:
		return "", false, fmt.Errorf("complete lifecycle action of %s: %w", instance, err)
	}
	return "", false, nil
}

// TerminationSummary is what a sweep did to one held termination.
type TerminationSummary struct {
	InstanceID string  `json:"instance_id"`
	Leases     int     `json:"leases"`
	Outcome    Outcome `json:"outcome"`
	Requeued   int     `json:"requeued,omitempty"`
	Note       string  `json:"note,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// Sweep tends every held termination, as the schedule's tick (once a
// minute) asks: an instance whose workers hold no lease has its action
// completed; one past its drain deadline has its leases requeued (no
// attempt spent) and its action completed; otherwise the action is
// heartbeated when HeartbeatEvery has passed since the last heartbeat. A
// failure on one instance does not stop the others; the sweep answers them
// all joined, and the termination stays held for the next sweep.
func (h *Handler) Sweep(ctx context.Context) ([]TerminationSummary, error) {
	ts, err := h.store.Terminations(ctx)
	if err != nil {
		return nil, fmt.Errorf("sweep held terminations: %w", err)
	}
	now := h.clock.Now()
	out := make([]TerminationSummary, 0, len(ts))
	var errs []error
	for _, t := range ts {
		r := h.tend(ctx, t, now)
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("held termination of %s: %s", t.InstanceID, r.Error))
		}
		h.log.Info("held termination tended", "instance_id", t.InstanceID, "leases", r.Leases,
			"outcome", r.Outcome, "requeued", r.Requeued, "error", r.Error)
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// tend moves one held termination on at now (see Sweep).
func (h *Handler) tend(ctx context.Context, t worker.Termination, now time.Time) TerminationSummary {
	r := TerminationSummary{InstanceID: t.InstanceID}
	fail := func(err error) TerminationSummary {
		r.Outcome, r.Error = OutcomeFailed, err.Error()
		return r
	}
	ws, err := h.store.WorkersByInstance(ctx, t.InstanceID)
	if err != nil {
		return fail(err)
	}
	for _, w := range ws {
		r.Leases += w.Leases
	}
	// requeueAll gives back what still runs there.
	requeueAll := func() error {
		n, err := h.store.RequeueLeasesOf(ctx, ws, job.Shutdown.Reason(), nil)
		r.Requeued += n
		return err
	}
	// finish completes the action and forgets the termination.
	finish := func(outcome Outcome) TerminationSummary {
		note, _, err := h.complete(ctx, t.Group, t.Hook, t.InstanceID, t.Token)
		if err != nil {
			return fail(err)
		}
		if err := h.store.EndTermination(ctx, t.InstanceID); err != nil {
			return fail(err)
		}
		r.Outcome, r.Note = outcome, note
		return r
	}
	switch {
	case r.Leases == 0:
		return finish(OutcomeDrained)
	case !now.Before(t.Deadline):
		if err := requeueAll(); err != nil {
			return fail(err)
		}
		return finish(OutcomeDeadline)
	case now.Sub(t.HeartbeatAt) < h.heartbeatEvery:
		r.Outcome = OutcomeWaiting
		return r
	}
	hb, ok := h.lifecycle.(Heartbeater)
	if !ok {
		r.Outcome, r.Note = OutcomeWaiting, "this stack cannot heartbeat lifecycle actions"
		return r
	}
	err = hb.HeartbeatLifecycle(ctx, t.Group, t.Hook, t.InstanceID, t.Token)
	if errors.Is(err, asg.ErrNoActiveLifecycleAction) {
		if err := requeueAll(); err != nil {
			return fail(err)
		}
		if err := h.store.EndTermination(ctx, t.InstanceID); err != nil {
			return fail(err)
		}
		r.Outcome = OutcomeLapsed
		return r
	}
	if err != nil {
		return fail(err)
	}
	if err := h.store.RecordTerminationHeartbeat(ctx, t.InstanceID, now); err != nil && !errors.Is(err, fault.ErrNotFound) {
		return fail(err)
	}
	r.Outcome = OutcomeHeartbeat
	return r
}
