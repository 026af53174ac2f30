package clock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Clock tells the current time and makes the timers and tickers that loops
// wait on, so that a test can drive them with a Fake.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After waits for d to pass and then sends the time on the channel.
	After(d time.Duration) <-chan time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that ticks every d (d must be positive).
	NewTicker(d time.Duration) Ticker
}

// Timer is a single event on a Clock, like time.Timer.
type Timer interface {
	// Chan delivers the time when the timer fires.
	Chan() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was still
	// pending.
	Stop() bool
	// Reset makes the timer fire after d; it reports whether it was still
	// pending.
	Reset(d time.Duration) bool
}

// Ticker is a repeating event on a Clock, like time.Ticker.
type Ticker interface {
	// Chan delivers the time of each tick (a slow reader misses ticks).
	Chan() <-chan time.Time
	// Stop ends the ticks.
	Stop()
	// Reset makes the ticker tick every d from now on.
	Reset(d time.Duration)
}

// wall is the real clock behind Real.
var wall = clockwork.NewRealClock()

// Real is the wall clock, always in UTC.
type Real struct{}

// Now returns the current UTC time.
func (Real) Now() time.Time { return wall.Now().UTC() }

// After waits for d of wall-clock time.
func (Real) After(d time.Duration) <-chan time.Time { return wall.After(d) }

// NewTimer returns a wall-clock timer.
func (Real) NewTimer(d time.Duration) Timer { return wall.NewTimer(d) }

// NewTicker returns a wall-clock ticker.
func (Real) NewTicker(d time.Duration) Ticker { return wall.NewTicker(d) }

// epoch is where a zero Fake starts.
var epoch = time.Unix(0, 0).UTC()

// Fake is a manually driven clock for tests: its time, timers and tickers
// move only when the test calls Advance or Set. The zero value starts at
// the Unix epoch; use NewFake for a fixed, readable start.
type Fake struct {
	once sync.Once
	fc   *clockwork.FakeClock
}

// NewFake returns a fake clock set to t (in UTC).
func NewFake(t time.Time) *Fake {
	f := &Fake{fc: clockwork.NewFakeClockAt(t.UTC())}
	f.once.Do(func() {})
	return f
}

func (f *Fake) clock() *clockwork.FakeClock {
	f.once.Do(func() { f.fc = clockwork.NewFakeClockAt(epoch) })
	return f.fc
}

// Now returns the fake clock's current time.
func (f *Fake) Now() time.Time { return f.clock().Now() }

// After fires once the fake clock has been moved d forward.
func (f *Fake) After(d time.Duration) <-chan time.Time { return f.clock().After(d) }

// NewTimer returns a timer that fires once the fake clock has been moved d
// forward.
func (f *Fake) NewTimer(d time.Duration) Timer { return f.clock().NewTimer(d) }

// NewTicker returns a ticker that ticks each time the fake clock passes
// another multiple of d.
func (f *Fake) NewTicker(d time.Duration) Ticker { return fakeTicker{f.clock().NewTicker(d)} }

// fakeTicker stops clockwork's fake ticker before resetting it: its Reset
// alone leaves the old schedule registered too, so Stop would not end it.
type fakeTicker struct{ clockwork.Ticker }

func (t fakeTicker) Reset(d time.Duration) {
	t.Ticker.Stop()
	t.Ticker.Reset(d)
}

// Advance moves the clock forward by d, firing, in order, every timer and
// ticker that falls due on the way.
func (f *Fake) Advance(d time.Duration) { f.clock().Advance(d) }

// Set moves the clock forward to t, as Advance does. The clock never runs
// backwards (timers already waiting could not be told), so a t before the
// current time panics.
func (f *Fake) Set(t time.Time) {
	now := f.Now()
	if t.Before(now) {
		panic(fmt.Sprintf("clock: Set(%s) would move the fake clock back from %s", t.UTC(), now))
	}
	f.Advance(t.Sub(now))
}

// BlockUntil waits until at least n timers and tickers (including pending
// After calls) are waiting on the clock, or ctx ends. A test calls it
// before Advance to know the loops it drives have reached their wait.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	return f.clock().BlockUntilContext(ctx, n)
}

// Waiting answers how many timers and tickers (including pending After
// calls) wait on the clock now. A test that has waited for the waits it
// counted (BlockUntil) checks with it that none more wait: a wait it did
// not count would have let BlockUntil answer before one it did.
func (f *Fake) Waiting() int {
	// clockwork tells only whether at least n wait; with a context already
	// ended, BlockUntilContext answers that at once (a probe that finds
	// fewer leaves a waiter of its own behind in clockwork, released once
	// n wait; it holds no goroutine).
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	for f.clock().BlockUntilContext(ended, n+1) == nil {
		n++
	}
	return n
}

// Every calls f every interval of c's time until ctx ends (the dev stack's
// background loops; in AWS a schedule drives the same work).
func Every(ctx context.Context, c Clock, interval time.Duration, f func()) {
	t := c.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			f()
		}
	}
}
