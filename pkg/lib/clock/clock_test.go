package clock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// fired reports whether ch has a value ready now.
func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case at := <-ch:
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestRealIsUTC(t *testing.T) {
	now := clock.Real{}.Now()
	if now.Location() != time.UTC {
		t.Fatalf("Real.Now is in %s", now.Location())
	}
	if d := time.Since(now); d < 0 || d > time.Minute {
		t.Fatalf("Real.Now is %s away from the wall clock", d)
	}
}

func TestRealTimerFires(t *testing.T) {
	var c clock.Clock = clock.Real{}
	select {
	case <-c.NewTimer(time.Millisecond).Chan():
	case <-time.After(10 * time.Second):
		t.Fatal("a 1ms real timer did not fire")
	}
	select {
	case <-c.After(time.Millisecond):
	case <-time.After(10 * time.Second):
		t.Fatal("a 1ms real After did not fire")
	}
	tk := c.NewTicker(time.Millisecond)
	defer tk.Stop()
	select {
	case <-tk.Chan():
	case <-time.After(10 * time.Second):
		t.Fatal("a 1ms real ticker did not tick")
	}
}

func TestFakeNowAndSet(t *testing.T) {
	c := clock.NewFake(t0.In(time.FixedZone("X", 3600)))
	if !c.Now().Equal(t0) || c.Now().Location() != time.UTC {
		t.Fatalf("start %s", c.Now())
	}
	c.Advance(90 * time.Second)
	if want := t0.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("after Advance: %s, want %s", c.Now(), want)
	}
	timer := c.NewTimer(time.Hour)
	c.Set(t0.Add(2 * time.Hour))
	if !c.Now().Equal(t0.Add(2 * time.Hour)) {
		t.Fatalf("after Set: %s", c.Now())
	}
	if _, ok := fired(timer.Chan()); !ok {
		t.Fatal("Set forward did not fire a timer that fell due")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Set backwards did not panic")
		}
	}()
	c.Set(t0)
}

func TestFakeZeroValueStartsAtEpoch(t *testing.T) {
	var c clock.Fake
	if !c.Now().Equal(time.Unix(0, 0)) {
		t.Fatalf("zero Fake at %s", c.Now())
	}
	c.Advance(time.Second)
	if !c.Now().Equal(time.Unix(1, 0)) {
		t.Fatalf("zero Fake after a second: %s", c.Now())
	}
}

func TestFakeTimerFiresOnAdvance(t *testing.T) {
	c := clock.NewFake(t0)
	timer := c.NewTimer(10 * time.Second)
	after := c.After(5 * time.Second)
	c.Advance(5*time.Second - time.Nanosecond)
	if _, ok := fired(timer.Chan()); ok {
		t.Fatal("the timer fired early")
	}
	if _, ok := fired(after); ok {
		t.Fatal("After fired early")
	}
	c.Advance(time.Nanosecond)
	if at, ok := fired(after); !ok || !at.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("After: fired %v at %s", ok, at)
	}
	c.Advance(time.Hour)
	if at, ok := fired(timer.Chan()); !ok || !at.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("timer: fired %v at %s (it fires at its own time, not the end of the step)", ok, at)
	}
}

func TestFakeTimerStopAndReset(t *testing.T) {
	c := clock.NewFake(t0)
	timer := c.NewTimer(time.Second)
	if !timer.Stop() {
		t.Fatal("Stop of a pending timer answered false")
	}
	c.Advance(time.Minute)
	if _, ok := fired(timer.Chan()); ok {
		t.Fatal("a stopped timer fired")
	}
	if timer.Stop() {
		t.Fatal("a second Stop answered true")
	}
	timer.Reset(time.Second)
	c.Advance(time.Second)
	if _, ok := fired(timer.Chan()); !ok {
		t.Fatal("a reset timer did not fire")
	}
}

func TestFakeTickerTicksAndStops(t *testing.T) {
	c := clock.NewFake(t0)
	tk := c.NewTicker(time.Second)
	for i := 1; i <= 3; i++ {
		c.Advance(time.Second)
		at, ok := fired(tk.Chan())
		if !ok || !at.Equal(t0.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("tick %d: %v at %s", i, ok, at)
		}
	}
	c.Advance(500 * time.Millisecond)
	if _, ok := fired(tk.Chan()); ok {
		t.Fatal("ticked between ticks")
	}
	tk.Reset(2 * time.Second)
	c.Advance(time.Second)
	if _, ok := fired(tk.Chan()); ok {
		t.Fatal("ticked on the old interval after Reset")
	}
	c.Advance(time.Second)
	if _, ok := fired(tk.Chan()); !ok {
		t.Fatal("no tick on the new interval")
	}
	tk.Stop()
	c.Advance(time.Hour)
	if _, ok := fired(tk.Chan()); ok {
		t.Fatal("a stopped ticker ticked")
	}
}

func TestFakeBlockUntil(t *testing.T) {
	c := clock.NewFake(t0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-c.After(time.Minute)
	}()
	if err := c.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("the waiting goroutine never reached the clock: %v", err)
	}
	c.Advance(time.Minute)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the goroutine was not released by Advance")
	}
	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if err := c.BlockUntil(short, 1); err == nil {
		t.Fatal("BlockUntil answered with nothing waiting on the clock")
	}
}

func TestEveryUsesTheClock(t *testing.T) {
	c := clock.NewFake(t0)
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{})
	var n atomic.Int32
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		clock.Every(ctx, c, time.Minute, func() { n.Add(1); calls <- struct{}{} })
	}()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := c.BlockUntil(wait, 1); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 0 {
		t.Fatal("called before the first interval")
	}
	for i := 0; i < 3; i++ {
		c.Advance(time.Minute)
		select {
		case <-calls:
		case <-wait.Done():
			t.Fatalf("call %d did not come", i+1)
		}
	}
	cancel()
	select {
	case <-stopped:
	case <-wait.Done():
		t.Fatal("Every did not return when ctx ended")
	}
	if n.Load() != 3 {
		t.Fatalf("%d calls", n.Load())
	}
}

func TestFakeWaitingCountsTimersAndTickers(t *testing.T) {
	c := clock.NewFake(t0)
	if n := c.Waiting(); n != 0 {
		t.Fatalf("%d waiting on a new clock", n)
	}
	timer := c.NewTimer(time.Second)
	after := c.After(2 * time.Second)
	tk := c.NewTicker(time.Minute)
	if n := c.Waiting(); n != 3 {
		t.Fatalf("%d waiting with a timer, an After and a ticker", n)
	}
	timer.Stop()
	if n := c.Waiting(); n != 2 {
		t.Fatalf("%d waiting after a Stop", n)
	}
	c.Advance(2 * time.Second)
	<-after
	if n := c.Waiting(); n != 1 {
		t.Fatalf("%d waiting once After fired (the ticker goes on)", n)
	}
	// Asking again, after probes that found fewer, counts the same.
	if n := c.Waiting(); n != 1 {
		t.Fatalf("%d waiting, asked again", n)
	}
	tk.Stop()
	if n := c.Waiting(); n != 0 {
		t.Fatalf("%d waiting after the ticker stopped", n)
	}
	timer.Reset(time.Second)
	if n := c.Waiting(); n != 1 {
		t.Fatalf("%d waiting after a Reset", n)
	}
}
