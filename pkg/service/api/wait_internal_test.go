package api

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

type waited struct {
	j   job.Job
	err error
}

// startWait runs waitForChange on a fake clock for a job that is queued
// when the wait begins; status says what each read finds.
func startWait(t *testing.T, status *atomic.Value, reads *atomic.Int32) (*clock.Fake, <-chan waited, func()) {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	read := func(context.Context) (job.Job, error) {
		reads.Add(1)
		return job.Job{ID: "acme:a", Status: status.Load().(job.Status)}, nil
	}
	done := make(chan waited, 1)
	go func() {
		j, err := waitForChange(t.Context(), clk, WaitReread, 20*time.Second, job.Job{ID: "acme:a", Status: job.Queued}, job.Queued, read)
		done <- waited{j, err}
	}()
	// stillWaiting returns once the wait has armed its deadline and its
	// next read, and fails the test if it answered instead.
	stillWaiting := func() {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		armed := make(chan error, 1)
		go func() { armed <- clk.BlockUntil(ctx, 2) }()
		select {
		case w := <-done:
			t.Fatalf("the wait answered %s at %s, before a change or its deadline", w.j.Status, clk.Now().Format(time.TimeOnly))
		case err := <-armed:
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return clk, done, stillWaiting
}

func TestWaitForChangeAnswersTheReadThatFindsTheChange(t *testing.T) {
	var status atomic.Value
	status.Store(job.Queued)
	var reads atomic.Int32
	clk, done, stillWaiting := startWait(t, &status, &reads)
	for range 3 {
		stillWaiting()
		clk.Advance(WaitReread)
	}
	stillWaiting()
	status.Store(job.Leased)
	clk.Advance(WaitReread)
	w := <-done
	if w.err != nil || w.j.Status != job.Leased {
		t.Fatalf("answered %+v, want the leased job", w)
	}
	if n := reads.Load(); n != 4 {
		t.Fatalf("%d reads in 4 s of waiting, want one a second", n)
	}
}

func TestWaitForChangeAnswersTheJobUnchangedAtItsDeadline(t *testing.T) {
	var status atomic.Value
	status.Store(job.Queued)
	var reads atomic.Int32
	clk, done, stillWaiting := startWait(t, &status, &reads)
	for range 19 {
		stillWaiting()
		clk.Advance(WaitReread)
	}
	stillWaiting()
	clk.Advance(WaitReread)
	w := <-done
	if w.err != nil || w.j.Status != job.Queued {
		t.Fatalf("answered %+v at the deadline, want the job still queued", w)
	}
	if n := reads.Load(); n < 20 || n > 21 {
		t.Fatalf("%d reads in a 20 s wait, want one a second and one at the deadline", n)
	}
}

func TestWaitForChangeAnswersAtOnceWhenTheStatusIsNotTheOneGiven(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	read := func(context.Context) (job.Job, error) { t.Fatal("read again"); return job.Job{}, nil }
	j, err := waitForChange(t.Context(), clk, WaitReread, 20*time.Second, job.Job{Status: job.Succeeded}, job.Leased, read)
	if err != nil || j.Status != job.Succeeded {
		t.Fatalf("answered %+v, %v", j, err)
	}
}
