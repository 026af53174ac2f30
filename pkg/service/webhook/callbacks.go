package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/jobevent"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// CallbackStore is the part of the store the deliverer uses.
type CallbackStore interface {
	DueCallbacks(ctx context.Context, limit int) ([]jobevent.Callback, error)
	RecordCallback(ctx context.Context, c jobevent.Callback, r jobevent.CallbackResult) error
}

// Keys answers the webhook signing keys (the webhook key, a secret of its
// own: never a fleet's secret or the console key): deliveries are signed
// with the current one, and during a rotation window with the previous one
// too (signing.Ring.Signers).
type Keys interface {
	SigningKeys(ctx context.Context, kid string) (signing.Ring, error)
}

// Deliverer POSTs jobs' outcomes to their callback URLs, outside any
// request: the relay runs it after draining the outbox (every scaler tick
// in AWS, every relay interval in the dev stack). Each attempt is recorded
// on the job; a failed one is tried again after Backoff, until the
// stage's webhooks.max_attempts.
type Deliverer struct {
	store CallbackStore
	keys  Keys
	// client sends the deliveries: NewClient with the guard and the
	// stage's webhooks.timeout.
	client *http.Client
	// maxAttempts is webhooks.max_attempts.
	maxAttempts int
	clock       clock.Clock
	log         *slog.Logger
}

// NewDeliverer builds the deliverer of a stage's callbacks from its
// webhooks config; guard decides which addresses deliveries may reach. A
// failed attempt is tried again after DefaultBackoff. Every argument is
// required: NewDeliverer answers an error naming the one missing.
func NewDeliverer(w fleetconfig.Webhooks, st CallbackStore, keys Keys, guard Guard, clk clock.Clock, log *slog.Logger) (*Deliverer, error) {
	switch {
	case st == nil:
		return nil, errors.New("webhook.NewDeliverer: no store")
	case keys == nil:
		return nil, errors.New("webhook.NewDeliverer: no signing keys")
	case clk == nil:
		return nil, errors.New("webhook.NewDeliverer: no clock")
	case log == nil:
		return nil, errors.New("webhook.NewDeliverer: no logger")
	}
	return &Deliverer{store: st, keys: keys, client: NewClient(guard, w.Timeout.Std()), maxAttempts: w.MaxAttempts,
		clock: clk, log: log}, nil
}

// DefaultBackoff waits 30s after the first failure, doubling up to an hour:
// eight attempts span about an hour.
func DefaultBackoff(n int) time.Duration {
	d := 30 * time.Second
	for i := 1; i < n && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

// A Deliver call sends batches of deliverBatch callbacks, all at once, and
// starts another batch while the last one was full and less than
// deliverBudget has passed: with webhooks.timeout at most 15s, one call
// ends within about 30s, inside the scaler function's 50s.
const (
	deliverBatch  = 16
	deliverBudget = 15 * time.Second
)

// Deliver tries every due callback once and answers how many were
// delivered. A failure to reach the store is an error; a receiver's
// failure is only recorded.
func (d *Deliverer) Deliver(ctx context.Context) (int, error) {
	start := d.clock.Now()
	var keys []signing.Key
	total := 0
	for {
		due, err := d.store.DueCallbacks(ctx, deliverBatch)
		if err != nil || len(due) == 0 {
			return total, err
		}
		if keys == nil {
			ring, err := d.keys.SigningKeys(ctx, "")
			if err != nil {
				return total, fmt.Errorf("webhook signing key: %w", err)
			}
			keys = ring.Signers(start)
		}
		n, err := d.batch(ctx, keys, due)
		total += n
		if err != nil || len(due) < deliverBatch || d.clock.Now().Sub(start) >= deliverBudget {
			return total, err
		}
	}
}

// batch delivers callbacks concurrently.
func (d *Deliverer) batch(ctx context.Context, keys []signing.Key, due []jobevent.Callback) (int, error) {
	var (
		mu        sync.Mutex
		delivered int
		errs      []error
		wg        sync.WaitGroup
	)
	for _, c := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := d.attempt(ctx, keys, c)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				delivered++
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return delivered, errors.Join(errs...)
}

// attempt delivers one callback and records how it went.
func (d *Deliverer) attempt(ctx context.Context, keys []signing.Key, c jobevent.Callback) (bool, error) {
	e := c.Event
	body, err := json.Marshal(Delivery{ID: e.ID, Type: e.DetailType, Time: e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), Detail: e.Detail})
	if err != nil {
		return false, err
	}
	clk := d.clock
	sendErr := send(ctx, d.client, clk, c.URL, keys, e.ID, body)
	if ctx.Err() != nil {
		return false, ctx.Err() // stopping: the attempt does not count
	}
	var r jobevent.CallbackResult
	n := c.Attempts + 1
	switch {
	case sendErr == nil:
		r.Delivered = true
		d.log.InfoContext(ctx, "job callback delivered", "job_id", c.JobID, "event_id", e.ID, "attempts", n)
	case n >= max(d.maxAttempts, 1):
		r.Err = sendErr.Error()
		d.log.WarnContext(ctx, "job callback failed; giving up", "job_id", c.JobID, "event_id", e.ID, "url", redact(c.URL), "attempts", n, "error", Cause(sendErr))
	default:
		r.Err, r.NextAt = sendErr.Error(), clk.Now().Add(DefaultBackoff(n))
		d.log.InfoContext(ctx, "job callback failed; will retry", "job_id", c.JobID, "event_id", e.ID, "url", redact(c.URL), "attempts", n, "next_at", r.NextAt, "error", Cause(sendErr))
	}
	if err := d.store.RecordCallback(ctx, c, r); err != nil {
		return false, err
	}
	return r.Delivered, nil
}
