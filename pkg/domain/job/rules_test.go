package job

import (
	"testing"
	"time"
)

type steps []time.Duration

func (s steps) BackoffBefore(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	if n > len(s) {
		n = len(s)
	}
	return s[n-1]
}

var now = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func leased(attempts, maxAttempts, preemptions, maxPreemptions int) Job {
	return Job{Status: Leased, Attempts: attempts, MaxAttempts: maxAttempts, Preemptions: preemptions, MaxPreemptions: maxPreemptions}
}

func TestAfterFailure(t *testing.T) {
	backoff := steps{2 * time.Minute, 10 * time.Minute, 30 * time.Minute}
	cases := []struct {
		name      string
		j         Job
		retryable bool
		status    Status
		reason    Reason
		wait      time.Duration
	}{
		{"first attempt waits the first step", leased(1, 3, 0, 5), true, Queued, ReasonWorkerFailed, 2 * time.Minute},
		{"second attempt waits the second step", leased(2, 3, 0, 5), true, Queued, ReasonWorkerFailed, 10 * time.Minute},
		{"last attempt spent is dead", leased(3, 3, 0, 5), true, Dead, ReasonAttemptsSpent, 0},
		{"not retryable is dead at once", leased(1, 3, 0, 5), false, Dead, ReasonNotRetryable, 0},
		{"preemptions do not count as attempts", leased(1, 3, 4, 5), true, Queued, ReasonWorkerFailed, 2 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := AfterFailure(c.j, Error{Message: "boom", Retryable: c.retryable}, backoff, now)
			if o.Status != c.status || o.Reason != c.reason {
				t.Fatalf("got %s (%s), want %s (%s)", o.Status, o.Reason, c.status, c.reason)
			}
			if c.status == Queued && !o.NotBefore.Equal(now.Add(c.wait)) {
				t.Fatalf("not before %v, want now+%v", o.NotBefore, c.wait)
			}
			if c.status == Dead && !o.NotBefore.IsZero() {
				t.Fatalf("a dead job has no backoff, got %v", o.NotBefore)
			}
			if o.Attempts != c.j.Attempts || o.Preemptions != c.j.Preemptions {
				t.Fatalf("counters changed: attempts %d preemptions %d", o.Attempts, o.Preemptions)
			}
		})
	}
}

func TestAfterPreemptionGivesTheAttemptBackUntilTheCap(t *testing.T) {
	o := AfterPreemption(leased(2, 3, 0, 2), false)
	if o.Status != Queued || o.Attempts != 1 || o.Preemptions != 1 {
		t.Fatalf("first preemption: %+v, want queued with attempts 1, preemptions 1", o)
	}
	if !o.NotBefore.IsZero() {
		t.Fatal("a preempted job is due at once")
	}
	if o := AfterPreemption(leased(0, 3, 0, 2), false); o.Attempts != 0 {
		t.Fatalf("attempts went below zero: %d", o.Attempts)
	}
}

func TestAfterPreemptionAtTheCap(t *testing.T) {
	pinned := leased(1, 3, 7, 2)
	pinned.OnDemandOnly = true
	cases := []struct {
		name   string
		j      Job
		rung   bool
		want   Status
		reason Reason
		pinned bool
	}{
		{"under the cap, no rung", leased(1, 3, 1, 2), false, Queued, "", false},
		{"under the cap, with a rung: not pinned yet", leased(1, 3, 1, 2), true, Queued, "", false},
		{"past the cap, no rung: dead", leased(1, 3, 2, 2), false, Dead, ReasonPreemptionCap, false},
		{"past the cap, with a rung: pinned to On-Demand", leased(1, 3, 2, 2), true, Queued, ReasonPreemptionCapOnDemand, true},
		{"pinned and preempted again: stays pinned", pinned, true, Queued, "", true},
		{"pinned, rung since removed: dead, nothing could lease it", pinned, false, Dead, ReasonPreemptionCap, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := AfterPreemption(c.j, c.rung)
			if o.Status != c.want || o.Reason != c.reason || o.OnDemandOnly != c.pinned {
				t.Fatalf("AfterPreemption = %+v, want status %s reason %q on_demand_only %v", o, c.want, c.reason, c.pinned)
			}
			if o.Preemptions != c.j.Preemptions+1 || o.Attempts != c.j.Attempts-1 {
				t.Fatalf("counters %+v: want one more preemption and the attempt given back", o)
			}
		})
	}
}

func TestAfterLeaseExpirySpendsTheAttempt(t *testing.T) {
	if o := AfterLeaseExpiry(leased(1, 3, 0, 5)); o.Status != Queued || o.Reason != ReasonLeaseExpired || o.Attempts != 1 {
		t.Fatalf("expiry with attempts left: %+v", o)
	}
	if o := AfterLeaseExpiry(leased(3, 3, 0, 5)); o.Status != Dead || o.Reason != ReasonAttemptsSpent {
		t.Fatalf("expiry of the last attempt: %+v", o)
	}
}

func TestLeaseExpiredAndDue(t *testing.T) {
	j := Job{Status: Leased, LeaseExpiresAt: now}
	if !LeaseExpired(j, now) || LeaseExpired(j, now.Add(-time.Nanosecond)) {
		t.Fatal("a lease expires exactly at its expiry time, not before")
	}
	if LeaseExpired(Job{Status: Queued, LeaseExpiresAt: now}, now) {
		t.Fatal("only a leased job has a lease to expire")
	}
	q := Job{Status: Queued, NotBefore: now}
	if !Due(q, now) || Due(q, now.Add(-time.Second)) {
		t.Fatal("a queued job is due from its not-before time on")
	}
	if Due(Job{Status: Dead}, now) {
		t.Fatal("a dead job is never due")
	}
}

func TestTrimKeepsNewestWithRoom(t *testing.T) {
	var h []HistoryEntry
	for i := range HistoryLimit + 5 {
		h = append(h, HistoryEntry{Attempt: i})
	}
	got := Trim(h, 2)
	if len(got) != HistoryLimit-2 || got[len(got)-1].Attempt != HistoryLimit+4 {
		t.Fatalf("kept %d entries ending at %d", len(got), got[len(got)-1].Attempt)
	}
	if short := h[:3]; len(Trim(short, 2)) != 3 {
		t.Fatal("a short history is kept whole")
	}
}

func TestParsePreemptReason(t *testing.T) {
	for _, ok := range []string{"spot_interruption", "rebalance", "shutdown", "scale_in"} {
		if _, err := ParsePreemptReason(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "SPOT_INTERRUPTION", "crash"} {
		if _, err := ParsePreemptReason(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
