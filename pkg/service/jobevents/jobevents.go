package jobevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/fleetq/fleetq/pkg/domain/jobevent"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// Source is the EventBridge source of every fleetq event.
const Source = "fleetq"

// PutEventsAPI is the part of the EventBridge API the publisher uses.
type PutEventsAPI interface {
	PutEvents(context.Context, *eventbridge.PutEventsInput, ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// EventBridge publishes to one event bus.
type EventBridge struct {
	Client PutEventsAPI
	Bus    string
}

// maxEntries is PutEvents' limit per call.
const maxEntries = 10

// Publish sends the events in calls of up to ten. Any entry EventBridge did
// not accept fails the whole publish: the outbox keeps every event and sends
// them again, with the same ids, so accepted ones may arrive twice but none
// is lost.
func (p EventBridge) Publish(ctx context.Context, events []jobevent.Event) error {
	for start := 0; start < len(events); start += maxEntries {
		batch := events[start:min(start+maxEntries, len(events))]
		in := &eventbridge.PutEventsInput{}
		for _, e := range batch {
			detail, err := json.Marshal(e.Detail)
			if err != nil {
				return fmt.Errorf("encode event %s: %w", e.ID, err)
			}
			in.Entries = append(in.Entries, ebtypes.PutEventsRequestEntry{
				EventBusName: aws.String(p.Bus), Source: aws.String(Source), DetailType: aws.String(e.DetailType),
				Detail: aws.String(string(detail)), Time: aws.Time(e.Time), Resources: []string{},
			})
		}
		out, err := p.Client.PutEvents(ctx, in)
		if err != nil {
			return fmt.Errorf("put events: %w", err)
		}
		if out.FailedEntryCount > 0 {
			for _, r := range out.Entries {
				if r.ErrorCode != nil {
					return fmt.Errorf("put events: %d of %d entries refused (%s: %s)", out.FailedEntryCount, len(batch), aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))
				}
			}
			return fmt.Errorf("put events: %d of %d entries refused", out.FailedEntryCount, len(batch))
		}
	}
	return nil
}

// Event is an event as a bus delivers it (the EventBridge envelope fields a
// consumer reads).
type Event struct {
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	Time       string          `json:"time"`
	Detail     jobevent.Detail `json:"detail"`
}

// Bus is an in-process event bus that keeps the last Keep events.
type Bus struct {
	Keep int

	mu     sync.Mutex
	events []Event
}

// Publish records the events.
func (b *Bus) Publish(_ context.Context, events []jobevent.Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range events {
		b.events = append(b.events, Event{Source: Source, DetailType: e.DetailType, Time: e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), Detail: e.Detail})
	}
	keep := b.Keep
	if keep <= 0 {
		keep = 1000
	}
	if over := len(b.events) - keep; over > 0 {
		b.events = append([]Event(nil), b.events[over:]...)
	}
	return nil
}

// Recent returns up to n of the newest events, oldest first.
func (b *Bus) Recent(n int) []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n <= 0 || n > len(b.events) {
		n = len(b.events)
	}
	return append([]Event(nil), b.events[len(b.events)-n:]...)
}

// Outbox is the part of the store the relay uses.
type Outbox interface {
	RelayJob(ctx context.Context, p jobevent.Publisher, jobID string) (int, error)
	RelayOutbox(ctx context.Context, p jobevent.Publisher, limit int) (int, error)
}

// Relay moves events from the store's outbox to a publisher.
type Relay struct {
	outbox    Outbox
	publisher jobevent.Publisher
	clock     clock.Clock
	log       *slog.Logger
	callbacks Deliverer
}

// Config holds the relay's optional settings; the zero Config is the
// defaults.
type Config struct {
	// Callbacks delivers jobs' outcomes to their callback URLs after each
	// Drain (the webhook deliverer; default nil: the stage delivers no
	// callbacks).
	Callbacks Deliverer
}

// NewRelay returns the relay of outbox's events to publisher. clk paces Run.
func NewRelay(outbox Outbox, publisher jobevent.Publisher, clk clock.Clock, log *slog.Logger, c Config) (*Relay, error) {
	switch {
	case outbox == nil:
		return nil, errors.New("jobevents.NewRelay: no outbox")
	case publisher == nil:
		return nil, errors.New("jobevents.NewRelay: no publisher")
	case clk == nil:
		return nil, errors.New("jobevents.NewRelay: no clock")
	case log == nil:
		return nil, errors.New("jobevents.NewRelay: no logger")
	}
	return &Relay{outbox: outbox, publisher: publisher, clock: clk, log: log, callbacks: c.Callbacks}, nil
}

// Callbacks is the relay's deliverer of callbacks (nil: none).
func (r *Relay) Callbacks() Deliverer { return r.callbacks }

// Deliverer sends what the relay filed for delivery outside the outbox.
type Deliverer interface {
	Deliver(ctx context.Context) (int, error)
}

// Announce publishes one job's pending events now. A failure is logged and
// left to Drain: the events stay in the outbox.
func (r *Relay) Announce(ctx context.Context, jobID string) {
	if _, err := r.outbox.RelayJob(ctx, r.publisher, jobID); err != nil {
		r.log.WarnContext(ctx, "job events left in the outbox for the next relay", "job_id", jobID, "error", err.Error())
	}
}

// DrainLimit is how many jobs' events one Drain call relays.
const DrainLimit = 100

// Drain relays pending events until the outbox is empty or a relay fails,
// then delivers the due callbacks, and answers how many events went out.
func (r *Relay) Drain(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := r.outbox.RelayOutbox(ctx, r.publisher, DrainLimit)
		total += n
		if err != nil || n == 0 {
			if r.callbacks != nil {
				if _, cerr := r.callbacks.Deliver(ctx); cerr != nil {
					err = errors.Join(err, fmt.Errorf("deliver callbacks: %w", cerr))
				}
			}
			return total, err
		}
	}
}

// Run drains every interval until ctx ends (the dev stack's relay; in AWS
// the scaler tick drains).
func (r *Relay) Run(ctx context.Context, interval time.Duration) {
	clock.Every(ctx, r.clock, interval, func() {
		if _, err := r.Drain(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "relay of job events failed; retrying", "error", err.Error())
		}
	})
}
