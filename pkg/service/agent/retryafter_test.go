package agent_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// busyAPI answers the first polls with the given statuses and Retry-After
// seconds, as the API does when AWS throttles (503) or a rate limit holds
// (429), and passes everything else through.
type busyAPI struct {
	base    http.RoundTripper
	mu      sync.Mutex
	answers []busyAnswer
}

type busyAnswer struct {
	status     int
	code       string
	retryAfter string
}

func (b *busyAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	var a *busyAnswer
	if r.URL.Path == "/api/worker/poll" && len(b.answers) > 0 {
		a, b.answers = &b.answers[0], b.answers[1:]
	}
	b.mu.Unlock()
	if a == nil {
		return b.base.RoundTrip(r)
	}
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	body := `{"error":{"code":"` + a.code + `","message":"busy; retry after the Retry-After seconds"}}`
	h := http.Header{"Content-Type": {"application/json"}, "Retry-After": {a.retryAfter}}
	return &http.Response{StatusCode: a.status, Status: http.StatusText(a.status), Header: h, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// A poll answered 503 or 429 with Retry-After waits that long before the
// next poll (the agent's own backoff here is at most 240 ms).
func TestPollHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	e := newStack(t, true)
	busy := &busyAPI{base: http.DefaultTransport, answers: []busyAnswer{
		{http.StatusServiceUnavailable, "unavailable", "7"},
		{http.StatusTooManyRequests, "rate_limited", "3"},
	}}
	e.start("ra", agent.SleepRunner{}, func(c *agent.Config) {
		c.Clock = e.clock
		c.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: observed{e, busy}}
	})
	polls := func() int { return e.calls("/api/worker/poll") }
	e.waitFor("the first poll", func() bool { return polls() == 1 })
	for i, step := range []struct{ early, rest time.Duration }{
		{6900 * time.Millisecond, 100 * time.Millisecond},
		{2900 * time.Millisecond, 100 * time.Millisecond},
	} {
		testenv.Waiters(t, e.clock, 1)
		e.clock.Advance(step.early)
		testenv.Waiters(t, e.clock, 1)
		if n := polls(); n != i+1 {
			t.Fatalf("polled again %s after answer %d, before its Retry-After", step.early, i+1)
		}
		e.clock.Advance(step.rest)
		e.waitFor("the poll after Retry-After", func() bool { return polls() == i+2 })
	}
}
