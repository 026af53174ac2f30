package devstack_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// startWatched starts a dev stack of cfg on clk with the fleet options fo
// (the scaler ticking only when the test says so), closed when the test
// ends, and answers it with watchAgents' signal of its agents' requests.
func startWatched(t *testing.T, cfg *fleetconfig.Config, clk *clock.Fake, fo devstack.FleetOptions) (*devstack.Stack, <-chan struct{}) {
	t.Helper()
	fo.Tick = -1
	requests := watchAgents(&fo)
	stack, err := devstack.Start(context.Background(), devstack.Options{
		Addr: "127.0.0.1:0", Config: cfg, Logger: slog.New(slog.DiscardHandler), Clock: clk, Fleet: fo,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	return stack, requests
}

// watchAgents has every local agent of the stack fo configures signal the
// channel it answers each time one of its requests to the API returns: the
// signal the tests wait on for what the agents do in the background (a
// lease, a requeue, a completion). It keeps fo's own AgentConfig.
func watchAgents(fo *devstack.FleetOptions) <-chan struct{} {
	requests := make(chan struct{}, 1)
	configure := fo.AgentConfig
	fo.AgentConfig = func(fleet, instanceID string, c *agent.Config) {
		c.HTTP = &http.Client{Timeout: time.Minute, Transport: signaling{requests}}
		if configure != nil {
			configure(fleet, instanceID, c)
		}
	}
	return requests
}

// signaling signals after each round trip.
type signaling struct{ ch chan struct{} }

func (s signaling) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	select {
	case s.ch <- struct{}{}:
	default:
	}
	return res, err
}

// The timers and tickers the dev stack's pieces keep waiting on its fake
// clock when at rest (counted): the local fleet's steps; an agent's next
// poll, while it has a free slot; each job it runs, the heartbeat and the
// sleep runner's timer; its health checks, when it watches a GPU. Once
// that many wait, the next step of the clock reaches every one of them;
// testenv.Waiters and atRest fail a test whose count misses one.
const (
	fleetWaits  = 1
	pollWaits   = 1
	jobWaits    = 2
	healthWaits = 1
)

// restWaits is how many timers and tickers wait on the clock once the
// fleet's agents (without GPU checks) are at rest, by the store's count of
// each worker's leases.
func restWaits(s *devstack.Stack, fleet string) int {
	ws, err := s.Store.ListWorkers(context.Background(), fleet)
	if err != nil {
		return -1
	}
	n := fleetWaits
	for _, w := range ws {
		if w.Leases < w.MaxConcurrency {
			n += pollWaits
		}
		n += jobWaits * w.Leases
	}
	return n
}

// atRest waits until want() timers and tickers, and no more, wait on clk,
// want being computed again each time an agent's request returns (a lease
// or a completion changes it): the agents are back at their waits, and the
// next step of the clock reaches them. More waiting than want() says, with
// no request on its way to change it, is a count that misses a wait: it
// fails the test after Patience, naming both.
func atRest(t *testing.T, clk *clock.Fake, requests <-chan struct{}, want func() int) {
	t.Helper()
	deadline := time.NewTimer(testenv.Patience)
	defer deadline.Stop()
	for {
		n := want()
		ctx, cancel := context.WithCancel(context.Background())
		reached := make(chan error, 1)
		go func() { reached <- clk.BlockUntil(ctx, n) }()
		select {
		case err := <-reached:
			cancel()
			if err != nil {
				continue
			}
			waiting := clk.Waiting()
			if waiting == n {
				return
			}
			// More than counted: the next request may change the count.
			select {
			case <-requests:
			case <-deadline.C:
				t.Fatalf("gave up after %s waiting for %d waits on the fake clock: %d wait", testenv.Patience, n, waiting)
			}
		case <-requests:
			cancel()
			<-reached
		case <-deadline.C:
			cancel()
			t.Fatalf("gave up after %s waiting for %d waits on the fake clock", testenv.Patience, n)
		}
	}
}

// stepLeased moves clk forward by d as time passes for leases on a machine:
// in steps of the fleet's heartbeat interval, each once want() timers and
// tickers wait on clk (atRest), and the next only once each of jobs still
// leased has the lease the heartbeat of the step extended. A single step
// as long as a lease would fire, at once, the heartbeat or the completion
// that keeps the lease and the poll whose sweep ends a lease run out: on a
// busy machine the sweep can reach the store first and requeue a job its
// worker was about to finish.
func stepLeased(t *testing.T, s *devstack.Stack, clk *clock.Fake, requests <-chan struct{}, fleet string, d time.Duration, want func() int, jobs ...string) {
	t.Helper()
	f, ok := s.Config.Fleet(fleet)
	if !ok {
		t.Fatalf("no fleet %s", fleet)
	}
	every := time.Duration(f.HeartbeatSeconds) * time.Second
	for d > 0 {
		step := min(every, d)
		atRest(t, clk, requests, want)
		clk.Advance(step)
		d -= step
		if step < every {
			break // no heartbeat is due, nor any lease near its end
		}
		held := clk.Now().Add(f.LeaseDuration())
		testenv.Eventually(t, "the leases extended by the step's heartbeats", requests, func() bool {
			for _, id := range jobs {
				j, err := s.Store.GetJob(context.Background(), id)
				if err != nil || j.Status == job.Leased && j.LeaseExpiresAt.Before(held) {
					return false
				}
			}
			return true
		})
	}
}
