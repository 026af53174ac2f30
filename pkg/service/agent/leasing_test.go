package agent

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// leasingAtLog is a log handler that tells, for each message starting with
// prefix, whether the agent was still leasing when it was logged.
type leasingAtLog struct {
	a      **Agent
	prefix string
	seen   chan bool
}

func (h leasingAtLog) Enabled(context.Context, slog.Level) bool { return true }
func (h leasingAtLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.seen <- (*h.a).leasing.Load()
	}
	return nil
}
func (h leasingAtLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h leasingAtLog) WithGroup(string) slog.Handler      { return h }

// noTimeouts drops the IMDS client's timeouts, made for the instance's own
// service, for a stand-in in the test's process (a busy machine misses
// them).
func noTimeouts(o *imds.Options) { o.HTTPClient, o.DisableDefaultTimeout = &http.Client{}, true }

// newLeasingAgent is an agent whose log reports, at each message starting
// with prefix, whether it was still leasing; it is never run.
func newLeasingAgent(t *testing.T, prefix string, mutate func(*Config)) (*Agent, <-chan bool) {
	t.Helper()
	var a *Agent
	seen := make(chan bool, 1)
	c := Config{API: "http://127.0.0.1:1", FleetSecret: "s", Fleet: "gpu", Stage: "test", WorkerID: "w",
		Runner: SleepRunner{}, Clock: clock.NewFake(time.Now()), Logger: slog.New(leasingAtLog{&a, prefix, seen})}
	if mutate != nil {
		mutate(&c)
	}
	a, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return a, seen
}

// An agent that says it stops leasing has stopped: the main loop, which
// checks before each poll, cannot poll once the line is logged. (A test
// waiting for the line and then moving the clock past the poll interval
// saw one more poll when the log came first.)
func TestStopsLeasingBeforeSayingSo(t *testing.T) {
	t.Parallel()
	t.Run("rebalance recommendation", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
				w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
				_, _ = w.Write([]byte("token"))
			case r.URL.Path == "/latest/meta-data/events/recommendations/rebalance":
				_, _ = w.Write([]byte(`{"noticeTime":"2026-11-23T09:58:00Z"}`))
			default:
				http.NotFound(w, r)
			}
		}))
		defer srv.Close()
		a, seen := newLeasingAgent(t, "rebalance recommendation", func(c *Config) { c.Metadata = NewMetadata(srv.URL, noTimeouts) })
		// The agent's clock never moves: its first look is its only one.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() { defer close(done); a.watchMetadata(ctx) }()
		if testenv.Receive(t, "the recommendation logged", seen) {
			t.Fatal("the rebalance recommendation was logged while the agent still leased")
		}
		cancel()
		<-done
	})
	t.Run("unhealthy machine", func(t *testing.T) {
		t.Parallel()
		a, seen := newLeasingAgent(t, "machine unhealthy", nil)
		go a.giveUp("GPU 0 has uncorrectable ECC errors")
		if testenv.Receive(t, "the unhealthy machine logged", seen) {
			t.Fatal("the unhealthy machine was logged while the agent still leased")
		}
	})
}
