package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// Patience is how long a test waits for work that happens in the
// background (dispatch, an agent's requests, a loop reaching its wait)
// before it fails. Every wait is on the event itself, so Patience only
// tells a hang from slow work: a passing test waits as long as the work
// takes, and the machine running the tests may be busy enough (make test
// beside other work, -race) that seconds of work take tens of seconds.
const Patience = 2 * time.Minute

// Eventually checks cond, then again each time changed delivers, until it
// holds; after Patience it fails tb naming what it waited for. changed is
// the signal of the code under test that the state may have changed (a
// request made, a batch dispatched); Ticks stands in for one where the code
// offers none.
func Eventually[T any](tb testing.TB, what string, changed <-chan T, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(Patience)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-changed:
		case <-deadline.C:
			tb.Fatalf("gave up after %s waiting for %s", Patience, what)
		}
	}
}

// Receive answers the next value ch delivers; after Patience it fails tb
// naming what it waited for.
func Receive[T any](tb testing.TB, what string, ch <-chan T) T {
	tb.Helper()
	deadline := time.NewTimer(Patience)
	defer deadline.Stop()
	select {
	case v := <-ch:
		return v
	case <-deadline.C:
		tb.Fatalf("gave up after %s waiting for %s", Patience, what)
		panic("unreachable")
	}
}

// Waiters waits until n timers and tickers wait on clk: the loops a test
// drives have reached their waits and the next Advance reaches them. n is
// every wait on clk, the test's own count: more than n waiting fails tb at
// once, as a wait the count misses could have stood in for one it counts
// that was not there yet (the race a busy machine loses). After Patience it
// fails tb.
func Waiters(tb testing.TB, clk *clock.Fake, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	defer cancel()
	if err := clk.BlockUntil(ctx, n); err != nil {
		tb.Fatalf("gave up after %s waiting for %d waits on the fake clock: %v", Patience, n, err)
	}
	if got := clk.Waiting(); got > n {
		tb.Fatalf("%d timers and tickers wait on the fake clock, the test counted %d: its count misses a wait", got, n)
	}
}

// Ticks delivers every interval until the test ends: the signal for
// Eventually where the code under test offers none (a store read by
// another process, a browser).
func Ticks(tb testing.TB, every time.Duration) <-chan time.Time {
	t := time.NewTicker(every)
	tb.Cleanup(t.Stop)
	return t.C
}
