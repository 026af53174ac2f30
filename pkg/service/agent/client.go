package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// retryable reports whether a call may succeed if simply tried again
// (429, 5xx, or no answer at all).
func retryable(err error) bool {
	var ae *wire.Error
	if errors.As(err, &ae) {
		return ae.Status == http.StatusTooManyRequests || ae.Status >= 500
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

func isCode(err error, status int, code wire.Code) bool {
	var ae *wire.Error
	return errors.As(err, &ae) && ae.Status == status && (code == "" || ae.Code == code)
}

// Client calls the worker routes of the fleetq API.
type Client struct {
	API  string
	HTTP *http.Client
	// Log, when set, is told each request field the API refused as unknown
	// and the client now leaves out.
	Log *slog.Logger

	mu    sync.Mutex
	token string
	// omitted are, per route, the request fields the API refused as unknown
	// (an API of an earlier release): later calls leave them out without
	// being refused first.
	omitted map[string][]string
}

// Lease is a leased job as the poll answers it.
type Lease = wire.LeasedJob

// Register registers the worker and keeps its token; headers carry its
// credential (X-Fleetq-Identity, or X-Fleet-Secret).
func (c *Client) Register(ctx context.Context, headers map[string]string, r wire.RegisterRequest) (wire.RegisterResponse, error) {
	var out wire.RegisterResponse
	err := c.call(ctx, wire.PathRegister, headers, r, &out)
	if err == nil {
		c.mu.Lock()
		c.token = out.Token
		c.mu.Unlock()
	}
	return out, err
}

// BootReport reports, instead of registering, that the machine cannot
// work; headers carry the registration's credential.
func (c *Client) BootReport(ctx context.Context, headers map[string]string, r wire.BootReportRequest) error {
	return c.call(ctx, wire.PathBootReport, headers, r, nil)
}

// Poll asks for a job; nil when there is none now.
func (c *Client) Poll(ctx context.Context, load int) (*Lease, error) {
	var out wire.PollResponse
	if err := c.call(ctx, wire.PathPoll, nil, wire.PollRequest{CurrentLoad: &load}, &out); err != nil {
		return nil, err
	}
	return out.Job, nil
}

// Heartbeat extends a lease; refresh asks for fresh asset URLs.
func (c *Client) Heartbeat(ctx context.Context, jobID, token string, progress *float64, refresh bool) (wire.HeartbeatResponse, error) {
	body := wire.HeartbeatRequest{LeaseRef: wire.LeaseRef{JobID: jobID, LeaseToken: token}, Progress: progress, RefreshURLs: refresh}
	var out wire.HeartbeatResponse
	err := c.call(ctx, wire.PathHeartbeat, nil, body, &out)
	return out, err
}

// Complete reports success.
func (c *Client) Complete(ctx context.Context, jobID, token string, result json.RawMessage) error {
	body := wire.CompleteRequest{LeaseRef: wire.LeaseRef{JobID: jobID, LeaseToken: token}, Result: result}
	return c.call(ctx, wire.PathComplete, nil, body, nil)
}

// Fail reports a failure.
func (c *Client) Fail(ctx context.Context, jobID, token string, e *JobError) error {
	retry := e.Retryable
	body := wire.FailRequest{LeaseRef: wire.LeaseRef{JobID: jobID, LeaseToken: token},
		Error: &wire.FailError{Message: e.Message, Retryable: &retry, Code: e.Code}}
	return c.call(ctx, wire.PathFail, nil, body, nil)
}

// Requeue gives a job back without spending an attempt.
func (c *Client) Requeue(ctx context.Context, jobID, token string, reason job.PreemptReason) error {
	return c.call(ctx, wire.PathRequeue, nil, wire.RequeueRequest{LeaseRef: wire.LeaseRef{JobID: jobID, LeaseToken: token}, Reason: string(reason)}, nil)
}

// Deregister ends the worker; its token stops working.
func (c *Client) Deregister(ctx context.Context) error {
	return c.call(ctx, wire.PathDeregister, nil, wire.Empty{}, nil)
}

// Unhealthy reports the machine sick: the worker's leases are requeued,
// it takes no new work, and the scaler replaces its instance.
func (c *Client) Unhealthy(ctx context.Context, reason string) error {
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	return c.call(ctx, wire.PathUnhealthy, nil, wire.UnhealthyRequest{Reason: reason}, nil)
}

// call posts body to path and decodes a 2xx answer into out (a 204 leaves
// out untouched). A field the API refuses as unknown is left out, of this
// call and every later one to path, and the call made again at once.
func (c *Client) call(ctx context.Context, path string, headers map[string]string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	t := reflect.TypeOf(body)
	c.mu.Lock()
	for _, f := range c.omitted[path] {
		data, _ = omit(data, t, f)
	}
	c.mu.Unlock()
	for {
		err := c.post(ctx, path, headers, data, out)
		field, refused := refusedField(err)
		if !refused {
			return err
		}
		next, ok := omit(data, t, field)
		if !ok {
			return err
		}
		c.mu.Lock()
		if c.omitted == nil {
			c.omitted = map[string][]string{}
		}
		c.omitted[path] = append(c.omitted[path], field)
		c.mu.Unlock()
		if c.Log != nil {
			c.Log.Warn("the API does not know a request field (a previous release); leaving it out", "path", path, "field", field)
		}
		data = next
	}
}

// post sends one request.
func (c *Client) post(ctx context.Context, path string, headers map[string]string, data []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.API, "/")+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if headers == nil {
		c.mu.Lock()
		req.Header.Set("Authorization", "Bearer "+c.token)
		c.mu.Unlock()
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 {
		return wire.ReadError(res)
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if out == nil || res.StatusCode == http.StatusNoContent || len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, out)
}
