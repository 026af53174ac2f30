package job

import "time"

// Outcome is the state a job moves to after a report or an expiry.
type Outcome struct {
	Status Status
	// NotBefore is set when the job waits out a retry backoff.
	NotBefore time.Time
	// Attempts and Preemptions are the counters after the transition.
	Attempts    int
	Preemptions int
	Reason      Reason
	// OnDemandOnly: the job may from now on be leased by On-Demand workers
	// only (it reached its preemption cap in a fleet with an On-Demand rung).
	OnDemandOnly bool
}

// Backoff tells how long to wait after the n-th failed attempt (n from 1).
type Backoff interface {
	BackoffBefore(n int) time.Duration
}

// AfterFailure decides what a failed attempt turns a leased job into: back to
// the queue after the backoff while attempts remain and the error is
// retryable, else dead.
func AfterFailure(j Job, e Error, b Backoff, now time.Time) Outcome {
	o := Outcome{Attempts: j.Attempts, Preemptions: j.Preemptions}
	switch {
	case !e.Retryable:
		o.Status, o.Reason = Dead, ReasonNotRetryable
	case j.Attempts >= j.MaxAttempts:
		o.Status, o.Reason = Dead, ReasonAttemptsSpent
	default:
		o.Status, o.Reason = Queued, ReasonWorkerFailed
		o.NotBefore = now.Add(b.BackoffBefore(j.Attempts))
	}
	return o
}

// AfterPreemption decides what a requeue for a preemption turns a leased job
// into: straight back to the queue with its attempt given back, unless the
// job has been preempted more often than its cap allows. Past the cap the
// job is dead, or, when its fleet has an On-Demand rung (onDemandRung), it is
// queued again pinned to On-Demand workers (OnDemandOnly, reason
// preemption_cap_on_demand): Spot will not let it finish, On-Demand will. A
// job already pinned stays pinned and queued whatever preempts it again
// (a scale-in or shutdown of its On-Demand worker), still spending no attempt,
// unless the rung has since been removed: then nothing could lease it, and it
// is dead as it would have been without one.
func AfterPreemption(j Job, onDemandRung bool) Outcome {
	o := Outcome{Attempts: j.Attempts - 1, Preemptions: j.Preemptions + 1, OnDemandOnly: j.OnDemandOnly}
	if o.Attempts < 0 {
		o.Attempts = 0
	}
	o.Status = Queued
	switch {
	case j.OnDemandOnly && onDemandRung:
	case o.Preemptions <= j.MaxPreemptions:
	case onDemandRung:
		o.OnDemandOnly, o.Reason = true, ReasonPreemptionCapOnDemand
	default:
		o.Status, o.Reason = Dead, ReasonPreemptionCap
	}
	return o
}

// AfterLeaseExpiry decides what a lease that ran out without a heartbeat turns
// the job into. The worker vanished mid-attempt, so the attempt is spent; the
// job is queued again at once (a lost machine is no reason to wait) or dead
// when no attempt remains.
func AfterLeaseExpiry(j Job) Outcome {
	o := Outcome{Attempts: j.Attempts, Preemptions: j.Preemptions}
	if j.Attempts >= j.MaxAttempts {
		o.Status, o.Reason = Dead, ReasonAttemptsSpent
		return o
	}
	o.Status, o.Reason = Queued, ReasonLeaseExpired
	return o
}

// LeaseExpired reports whether a leased job's lease has run out at now.
func LeaseExpired(j Job, now time.Time) bool {
	return j.Status == Leased && !j.LeaseExpiresAt.After(now)
}

// Due reports whether a queued job may be leased at now (its backoff has passed).
func Due(j Job, now time.Time) bool {
	return j.Status == Queued && !j.NotBefore.After(now)
}
