package eta

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// estimate is the projection's estimate of a job at position pos.
func (p *projection) estimate(j *pjob, pos int) Estimate {
	e := Estimate{JobID: j.q.JobID, Position: pos, Basis: BasisProjection}
	switch {
	case j.started:
		e.StartAt = j.start
	case j.expired:
		e.Basis = BasisQueueTimeout
	default:
		e.Basis = p.unknown()
	}
	e.WaitingOn = p.waitingOn(j, e)
	return e
}

// order is the queue in lease order at now: the ready jobs as the planner
// orders them for a worker that serves every workflow (and, when some are
// pinned to On-Demand, is On-Demand), then those waiting out a backoff by
// when they are due.
func (p *projection) order() []*pjob {
	byID := map[string]*pjob{}
	var ready []lease.Candidate
	var later []*pjob
	for _, j := range p.jobs {
		byID[j.q.JobID] = j
		if j.q.NotBefore.After(p.now) {
			later = append(later, j)
		} else {
			ready = append(ready, j.q.Candidate)
		}
	}
	in := p.inputs(ready, lease.Worker{Workflows: p.workflows, OnDemand: lease.Pinned(ready)}, p.now)
	in.Tenants.Leased = p.censusNow
	in.Now = time.Time{} // every job is placed, past its queue deadline or not
	var out []*pjob
	placed := map[string]bool{}
	for _, a := range lease.MakePlan(in).Attempts {
		out = append(out, byID[a.JobID])
		placed[a.JobID] = true
	}
	for _, c := range ready {
		if !placed[c.JobID] { // none is left out, whatever the rule
			out = append(out, byID[c.JobID])
		}
	}
	slices.SortStableFunc(later, func(a, b *pjob) int { return a.q.NotBefore.Compare(b.q.NotBefore) })
	return append(out, later...)
}

// unknown is why a job the projection did not start has no StartAt.
func (p *projection) unknown() Basis {
	sp := p.s.Spot
	switch {
	case p.pendingNow > 0:
		return BasisAwaitingApproval
	case sp != nil && !sp.ShortSince.IsZero() && sp.After <= 0:
		return BasisSpotShort
	case !p.bootOK && p.launches+p.bootingNow > 0:
		return BasisNoHistory
	case p.held > 0 && p.atMax():
		return BasisAtMaxUnknownRunTimes
	case p.held > 0:
		return BasisNoHistory
	}
	return BasisBeyondHorizon
}

func (p *projection) atMax() bool {
	return p.s.Settings.Max > 0 && len(p.insts) >= p.s.Settings.Max
}

// waitingOn is the one thing the job waits on, most binding first: a
// backoff, its queue deadline, its tenant's cap, then what the slot it is
// projected to take is waiting for.
func (p *projection) waitingOn(j *pjob, e Estimate) WaitingOn {
	q := j.q
	switch {
	case q.NotBefore.After(p.now):
		return say(CodeBackoff, "waiting out a retry backoff until "+clock(q.NotBefore), ParamUntil, stamp(q.NotBefore))
	case j.started && !j.start.After(p.now) && j.on.origin == fromWorker && !j.reused:
		return say(CodeLeasing, "a free slot takes it at its next poll")
	case !q.QueueDeadline.IsZero() && (!j.started || j.start.After(q.QueueDeadline)):
		return say(CodeQueueDeadlineNear, "its queue timeout ends at "+clock(q.QueueDeadline)+", before it is expected to start",
			ParamAt, stamp(q.QueueDeadline))
	}
	if ts := p.s.Tenants; ts != nil {
		if c := ts(q.TenantID).MaxLeased; c > 0 && p.censusNow[q.TenantID] >= c {
			n := p.censusNow[q.TenantID]
			return say(CodeTenantAtCap, fmt.Sprintf("tenant %s runs %s, its max_leased; one must end first", q.TenantID, count(n, "job")),
				ParamTenant, q.TenantID, ParamLeased, strconv.Itoa(n), ParamMaxLeased, strconv.Itoa(c))
		}
	}
	if sp := p.s.Spot; sp != nil && !sp.ShortSince.IsZero() && (!j.started || (j.on.origin == fromTick && j.on.onDemand)) {
		return p.spotWait(sp)
	}
	ahead := e.Position - 1
	if !j.started {
		switch {
		case e.Basis == BasisAwaitingApproval:
			return say(CodeWorkerApproval, count(p.pendingNow, "worker")+" awaiting an operator's approval",
				ParamPending, strconv.Itoa(p.pendingNow))
		case e.Basis == BasisNoHistory && p.bootingNow > 0:
			them := "them"
			if p.bootingNow == 1 {
				them = "it"
			}
			return say(CodeCapacityBooting, count(p.bootingNow, "instance")+" booting; the fleet has no boot history to time "+them+" by",
				ParamInstances, strconv.Itoa(p.bootingNow))
		case e.Basis == BasisNoHistory && p.launches > 0:
			return say(CodeScaleOutNextTick, "the scaler's tick at "+clock(p.firstTick())+" launches capacity; the fleet has no boot history to time it by",
				ParamAt, stamp(p.firstTick()))
		case p.atMax():
			return say(CodeFleetAtMax, fmt.Sprintf("the fleet is at its max of %s and every slot is taken", count(p.s.Settings.Max, "instance")),
				ParamMax, strconv.Itoa(p.s.Settings.Max))
		}
		return say(CodeJobsAhead, count(ahead, "job")+" ahead", ParamAhead, strconv.Itoa(ahead))
	}
	ready, at := stamp(j.start), clock(j.start)
	switch {
	case !j.reused && j.on.origin == fromBooting:
		return say(CodeCapacityBooting, fmt.Sprintf("%s booting; one is expected ready for it at %s", count(p.bootingNow, "instance"), at),
			ParamInstances, strconv.Itoa(p.bootingNow), ParamReadyAt, ready)
	case !j.reused && j.on.origin == fromTick:
		return say(CodeScaleOutNextTick, fmt.Sprintf("the scaler's tick at %s launches %s; one is expected ready for it at %s",
			clock(j.on.tick), count(j.on.tickLaunch, "instance"), at),
			ParamAt, stamp(j.on.tick), ParamLaunch, strconv.Itoa(j.on.tickLaunch), ParamReadyAt, ready)
	case j.atMax:
		return say(CodeFleetAtMax, fmt.Sprintf("the fleet is at its max of %s; a slot is expected to free for it at %s",
			count(p.s.Settings.Max, "instance"), at),
			ParamMax, strconv.Itoa(p.s.Settings.Max), ParamReadyAt, ready)
	case ahead == 0:
		return say(CodeJobsAhead, "first in line; a running job is expected to end and free a slot for it at "+at,
			ParamAhead, "0", ParamReadyAt, ready)
	}
	return say(CodeJobsAhead, fmt.Sprintf("%s ahead; a slot is expected to free for it at %s", count(ahead, "job"), at),
		ParamAhead, strconv.Itoa(ahead), ParamReadyAt, ready)
}

// count is n things, in words: "1 job", "3 jobs".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// spotWait is a job waiting on Spot capacity, with the rung it moves to.
func (p *projection) spotWait(sp *Spot) WaitingOn {
	what := "capacity"
	if sp.InstanceType != "" {
		what = sp.InstanceType
	}
	if sp.AZ != "" {
		what += " in " + sp.AZ
	}
	args := []string{ParamSince, stamp(sp.ShortSince)}
	if sp.InstanceType != "" {
		args = append(args, ParamType, sp.InstanceType)
	}
	if sp.AZ != "" {
		args = append(args, ParamZone, sp.AZ)
	}
	if sp.After <= 0 {
		return say(CodeSpotUnavailable, fmt.Sprintf("Spot has had no %s since %s and the fleet has no On-Demand rung", what, clock(sp.ShortSince)), args...)
	}
	rung := sp.ShortSince.Add(sp.After)
	args = append(args, ParamNextRung, scaling.RungOnDemand, ParamRungAt, stamp(rung))
	return say(CodeSpotUnavailable, fmt.Sprintf("Spot has had no %s since %s; launches move to On-Demand at %s", what, clock(sp.ShortSince), clock(rung)), args...)
}

// firstTick is the first tick of the projection.
func (p *projection) firstTick() time.Time {
	if p.s.NextTick.Before(p.now) {
		return p.now
	}
	return p.s.NextTick
}

// say makes a WaitingOn from its code, its line of text, and its params
// as name, value pairs.
func say(c Code, text string, pairs ...string) WaitingOn {
	w := WaitingOn{Code: c, Text: text}
	for i := 0; i+1 < len(pairs); i += 2 {
		if w.Params == nil {
			w.Params = map[string]string{}
		}
		w.Params[pairs[i]] = pairs[i+1]
	}
	return w
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func clock(t time.Time) string { return t.UTC().Format("15:04:05 UTC") }
