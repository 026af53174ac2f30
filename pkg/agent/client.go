package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// APIError is an error answer of the fleetq API (PROTOCOL.md's shape).
type APIError struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// retryable reports whether a call may succeed if simply tried again
// (429, 5xx, or no answer at all).
func retryable(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusTooManyRequests || ae.Status >= 500
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

func isCode(err error, status int, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status && (code == "" || ae.Code == code)
}

// Client calls the worker routes of the fleetq API.
type Client struct {
	API  string
	HTTP *http.Client

	mu    sync.Mutex
	token string
}

// Registration is the register body.
type Registration struct {
	WorkerID       string          `json:"worker_id"`
	Fleet          string          `json:"fleet_slug"`
	Stage          string          `json:"stage"`
	MaxConcurrency int             `json:"max_concurrency,omitempty"`
	InstanceID     string          `json:"instance_id,omitempty"`
	InstanceType   string          `json:"instance_type,omitempty"`
	AZ             string          `json:"availability_zone,omitempty"`
	Capabilities   json.RawMessage `json:"capabilities,omitempty"`
}

// Registered is the register answer (the token is kept by the client).
type Registered struct {
	WorkerID         string   `json:"worker_id"`
	Token            string   `json:"token"`
	Workflows        []string `json:"workflows_assigned"`
	LeaseSeconds     int      `json:"lease_seconds"`
	HeartbeatSeconds int      `json:"heartbeat_seconds"`
	PollSeconds      int      `json:"poll_seconds"`
}

// Lease is a leased job as the poll answers it.
type Lease struct {
	JobID          string            `json:"job_id"`
	TenantID       string            `json:"tenant_id"`
	WorkflowID     string            `json:"workflow_id"`
	Priority       int               `json:"priority"`
	Attempt        int               `json:"attempt"`
	LeaseToken     string            `json:"lease_token"`
	LeaseExpiresAt string            `json:"lease_expires_at"`
	Input          json.RawMessage   `json:"input"`
	InputURLs      map[string]string `json:"input_urls,omitempty"`
	OutputURL      string            `json:"output_url,omitempty"`
	OutputURLs     map[string]string `json:"output_urls,omitempty"`
}

// Beat is a heartbeat's answer.
type Beat struct {
	LeaseExpiresAt string            `json:"lease_expires_at"`
	Cancel         bool              `json:"cancel"`
	InputURLs      map[string]string `json:"input_urls,omitempty"`
	OutputURL      string            `json:"output_url,omitempty"`
	OutputURLs     map[string]string `json:"output_urls,omitempty"`
}

// Register registers the worker with the fleet secret and keeps its token.
func (c *Client) Register(ctx context.Context, secret string, r Registration) (Registered, error) {
	var out Registered
	err := c.call(ctx, "/api/worker/register", map[string]string{"X-Fleet-Secret": secret}, r, &out)
	if err == nil {
		c.mu.Lock()
		c.token = out.Token
		c.mu.Unlock()
	}
	return out, err
}

// Poll asks for a job; nil when there is none now.
func (c *Client) Poll(ctx context.Context, load int) (*Lease, error) {
	var out struct {
		Job *Lease `json:"job"`
	}
	if err := c.call(ctx, "/api/worker/poll", nil, map[string]int{"current_load": load}, &out); err != nil {
		return nil, err
	}
	return out.Job, nil
}

// Heartbeat extends a lease; refresh asks for fresh asset URLs.
func (c *Client) Heartbeat(ctx context.Context, jobID, token string, progress *float64, refresh bool) (Beat, error) {
	body := map[string]any{"job_id": jobID, "lease_token": token}
	if progress != nil {
		body["progress"] = *progress
	}
	if refresh {
		body["refresh_urls"] = true
	}
	var out Beat
	err := c.call(ctx, "/api/worker/heartbeat", nil, body, &out)
	return out, err
}

// Complete reports success.
func (c *Client) Complete(ctx context.Context, jobID, token string, result json.RawMessage) error {
	body := map[string]any{"job_id": jobID, "lease_token": token}
	if len(result) > 0 {
		body["result"] = result
	}
	return c.call(ctx, "/api/worker/complete", nil, body, nil)
}

// Fail reports a failure.
func (c *Client) Fail(ctx context.Context, jobID, token string, e *JobError) error {
	body := map[string]any{"job_id": jobID, "lease_token": token,
		"error": map[string]any{"message": e.Message, "retryable": e.Retryable, "code": e.Code}}
	return c.call(ctx, "/api/worker/fail", nil, body, nil)
}

// Requeue gives a job back without spending an attempt.
func (c *Client) Requeue(ctx context.Context, jobID, token, reason string) error {
	return c.call(ctx, "/api/worker/requeue", nil, map[string]any{"job_id": jobID, "lease_token": token, "reason": reason}, nil)
}

// Deregister ends the worker; its token stops working.
func (c *Client) Deregister(ctx context.Context) error {
	return c.call(ctx, "/api/worker/deregister", nil, map[string]any{}, nil)
}

// call posts body to path and decodes a 2xx answer into out (a 204 leaves
// out untouched).
func (c *Client) call(ctx context.Context, path string, headers map[string]string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
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
	raw, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if res.StatusCode >= 300 {
		ae := &APIError{Status: res.StatusCode, Code: "unknown", Message: res.Status}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
			ae.Code, ae.Message = e.Error.Code, e.Error.Message
		}
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil {
			ae.RetryAfter = time.Duration(s) * time.Second
		}
		return ae
	}
	if out == nil || res.StatusCode == http.StatusNoContent || len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, out)
}
