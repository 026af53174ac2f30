package interruption

// Outcome is what the handler did, in one word: with an event
// (Summary.Outcome), or in a sweep with a held termination
// (TerminationSummary.Outcome). Every outcome and what it means is in the
// outcomes table below, the one place they are worded; docs/scaling.md's
// table of outcomes is made from it (Outcomes, Means).
type Outcome string

// Outcomes of an event (what each means: the outcomes table).
const (
	OutcomeRequeued  Outcome = "requeued"
	OutcomeDraining  Outcome = "draining"
	OutcomeRemoved   Outcome = "removed"
	OutcomeCounted   Outcome = "counted"
	OutcomeHeld      Outcome = "held"
	OutcomeCompleted Outcome = "completed"
	OutcomeNoWorker  Outcome = "no_worker"
	OutcomeDuplicate Outcome = "duplicate"
	OutcomeIgnored   Outcome = "ignored"
)

// Outcomes of a held termination in a sweep; OutcomeLapsed is also a
// terminate lifecycle action no longer waiting when its event arrives.
const (
	OutcomeDrained   Outcome = "drained"
	OutcomeDeadline  Outcome = "deadline"
	OutcomeLapsed    Outcome = "lapsed"
	OutcomeHeartbeat Outcome = "heartbeat"
	OutcomeWaiting   Outcome = "waiting"
	OutcomeFailed    Outcome = "failed"
)

// outcomes words every outcome, in docs/scaling.md's order.
var outcomes = []struct {
	o     Outcome
	means string
}{
	{OutcomeRequeued, "the instance's workers drained, their leases requeued at once (no attempt spent)"},
	{OutcomeDraining, "the workers drained ahead of a scheduled change; running jobs finish"},
	{OutcomeRemoved, "the instance is gone: leases requeued (no attempt spent), workers removed"},
	{OutcomeCounted, "counted only; the workers keep running"},
	{OutcomeHeld, "the terminate lifecycle action held while running jobs finish (the sweep ends it)"},
	{OutcomeCompleted, "the terminate lifecycle action completed, leases requeued first (no attempt spent)"},
	{OutcomeNoWorker, "no worker runs on the instance: nothing to do"},
	{OutcomeDuplicate, "handled and counted before (a redelivery): nothing more to do"},
	{OutcomeIgnored, "the event asks for nothing"},
	{OutcomeDrained, "sweep: no job runs any more; the action completed"},
	{OutcomeDeadline, "sweep: the drain deadline passed; jobs still running requeued (no attempt spent), the action completed"},
	{OutcomeLapsed, "the group no longer waits on the action (timed out, or completed by someone else); jobs still running requeued"},
	{OutcomeHeartbeat, "sweep: jobs still run; the action heartbeated"},
	{OutcomeWaiting, "sweep: jobs still run; no heartbeat due"},
	{OutcomeFailed, "sweep: a call failed; the termination stays held for the next sweep"},
}

// Outcomes answers every outcome, in docs/scaling.md's order.
func Outcomes() []Outcome {
	out := make([]Outcome, len(outcomes))
	for i, o := range outcomes {
		out[i] = o.o
	}
	return out
}

// Means says what an outcome means ("" for none of the handler's).
func Means(o Outcome) string {
	for _, x := range outcomes {
		if x.o == o {
			return x.means
		}
	}
	return ""
}

// did records what the handler did with the event in its summary: the
// outcome and a note for a reader (the one writer of both).
func (s *Summary) did(o Outcome, note string) {
	s.Outcome, s.Note = o, note
}
