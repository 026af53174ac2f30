package scaling

import (
	"fmt"
	"sort"
	"time"
)

// Rungs of the fallback ladder: the purchase option new capacity is
// launched on.
const (
	RungSpot     = "spot"
	RungOnDemand = "on-demand"
)

// WhyOnDemand is a victim that is an idle On-Demand instance once Spot is
// back: its place, when the work needs it, is launched on Spot.
const WhyOnDemand = "on-demand"

// LadderInput is Decide's input for a fleet with two groups on one launch
// template: Spot, and On-Demand beside it. Input.Instances and
// Input.Workers cover both groups; Input.Desired is ignored (the groups'
// desired capacities are given apart).
type LadderInput struct {
	Input
	// OnDemand names the instances of the On-Demand group.
	OnDemand map[string]bool
	// SpotDesired and OnDemandDesired are each group's desired capacity now.
	SpotDesired, OnDemandDesired int
	// SpotShortSince is when the Spot group's launches began failing for
	// lack of capacity (its scaling activities say so); zero while they do
	// not fail.
	SpotShortSince time.Time
	// After is how long Spot may be short before launches move to
	// On-Demand; zero turns the On-Demand rung off.
	After time.Duration
	// WaitSLO, when above zero, moves launches to On-Demand sooner: once
	// Spot is short at all and the oldest ready job has waited longer than
	// it, even before After. Zero leaves the rung to After alone.
	WaitSLO time.Duration
	// OldestReadyWait is how long the oldest ready job has waited (zero
	// with no ready job).
	OldestReadyWait time.Duration
	// OnDemandOnlyReady and OnDemandOnlyLeased are the ready and leased
	// jobs (counted in Ready and Leased too) that only On-Demand workers may
	// lease: preempted as often as the fleet's preemption cap allows, they
	// move to capacity that will not be taken away instead of going dead.
	OnDemandOnlyReady, OnDemandOnlyLeased int
}

// LadderDecision is the policy's answer for the two groups.
type LadderDecision struct {
	Decision
	// Rung is where new capacity goes: RungSpot or RungOnDemand.
	Rung string
	// SpotDesired and OnDemandDesired are each group's desired capacity
	// once the victims are terminated and the launches asked for.
	SpotDesired, OnDemandDesired int
	// Drain names On-Demand instances whose workers hold leases once Spot
	// is back: they take no new work, finish what they run, and are then
	// terminated as drained; their place is launched on Spot.
	Drain []string
}

// DecideLadder applies Decide to a fleet with a Spot and an On-Demand
// group. On the Spot rung it is Decide with every launch on Spot; once
// Spot is back, idle On-Demand instances are terminated and busy ones
// drained (no new work; terminated when done), their places launched on
// Spot when the work needs them, so On-Demand hours stop within the jobs
// they run when Spot returns. Once Spot has been short for After, the Spot launches that have
// not started no longer count as capacity on the way, the launches the
// work needs go to the On-Demand group, and the Spot group keeps asking
// for one instance above what it has so Spot's return is seen.
//
// Jobs only On-Demand workers may lease (OnDemandOnlyReady and
// OnDemandOnlyLeased) get On-Demand
// capacity of their own first, whatever the rung: ceil(jobs / slots)
// On-Demand instances are set aside for them (busy ones first, then idle,
// then booting; the missing ones launched), and the rest of the fleet is
// decided on the rest of the work.
func DecideLadder(in LadderInput) LadderDecision {
	pinned := in.OnDemandOnlyReady + in.OnDemandOnlyLeased
	if pinned <= 0 {
		return decideLadder(in)
	}
	need := min(ceilDiv(pinned, in.Settings.Slots), in.Settings.Max)
	reserved := reserveOnDemand(in, need)
	rest := in
	rest.OnDemandOnlyReady, rest.OnDemandOnlyLeased = 0, 0
	rest.Ready = max(0, in.Ready-in.OnDemandOnlyReady)
	rest.Leased = max(0, in.Leased-in.OnDemandOnlyLeased)
	rest.Instances, rest.Workers = nil, nil
	for _, inst := range in.Instances {
		if !reserved[inst.ID] {
			rest.Instances = append(rest.Instances, inst)
		}
	}
	for _, w := range in.Workers {
		if !reserved[w.InstanceID] {
			rest.Workers = append(rest.Workers, w)
		}
	}
	rest.OnDemandDesired = max(0, max(in.OnDemandDesired, countIn(in.Instances, in.OnDemand))-len(reserved))
	// Pending On-Demand launches serve the reserved share first.
	pendingOD := rest.OnDemandDesired - countIn(rest.Instances, in.OnDemand)
	missing := need - len(reserved)
	fromPending := min(max(0, pendingOD), missing)
	rest.OnDemandDesired -= fromPending
	missing -= fromPending
	d := decideLadder(rest)
	d.OnDemandDesired += len(reserved) + fromPending + missing
	d.Launch += missing
	d.Desired = d.SpotDesired + d.OnDemandDesired
	part := fmt.Sprintf("%d jobs preempted to the cap keep %d On-Demand", pinned, need)
	if missing > 0 {
		part += fmt.Sprintf(", launch %d On-Demand", missing)
	}
	d.Reason = d.Reason.With(part)
	return d
}

// reserveOnDemand sets aside up to n On-Demand instances for jobs only
// On-Demand workers may lease: those with leases first, then idle ones,
// then booting ones.
func reserveOnDemand(in LadderInput, n int) map[string]bool {
	workers := map[string]Worker{}
	for _, w := range in.Workers {
		workers[w.InstanceID] = w
	}
	rank := func(id string) int {
		w, ok := workers[id]
		switch {
		case !ok:
			return 2
		case w.Draining:
			return 3
		case w.Leases > 0:
			return 0
		}
		return 1
	}
	var ids []string
	for _, inst := range in.Instances {
		if in.OnDemand[inst.ID] && rank(inst.ID) < 3 {
			ids = append(ids, inst.ID)
		}
	}
	sort.SliceStable(ids, func(a, b int) bool { return rank(ids[a]) < rank(ids[b]) })
	out := map[string]bool{}
	for _, id := range ids[:min(n, len(ids))] {
		out[id] = true
	}
	return out
}

func countIn(insts []Instance, set map[string]bool) int {
	n := 0
	for _, inst := range insts {
		if set[inst.ID] {
			n++
		}
	}
	return n
}

func decideLadder(in LadderInput) LadderDecision {
	now := in.Now
	var spotN, odN int
	for _, inst := range in.Instances {
		if in.OnDemand[inst.ID] {
			odN++
		} else {
			spotN++
		}
	}
	odHave := max(in.OnDemandDesired, odN)
	shortFor := time.Duration(0)
	if !in.SpotShortSince.IsZero() {
		shortFor = now.Sub(in.SpotShortSince)
	}
	onDemand := in.After > 0 && !in.SpotShortSince.IsZero() && shortFor >= in.After
	// The wait SLO: Spot short (for however long) and work waiting past it.
	slo := in.After > 0 && !in.SpotShortSince.IsZero() && !onDemand && in.WaitSLO > 0 && in.OldestReadyWait > in.WaitSLO
	onDemand = onDemand || slo

	dec := in.Input
	var retire []Victim
	var drain []string
	if onDemand {
		// Spot launches not started are not coming.
		dec.Desired = spotN + odHave
	} else {
		dec.Desired = max(in.SpotDesired, spotN) + odHave
		if in.SpotShortSince.IsZero() {
			retire = idleOnDemand(in)
			dec.Workers = nil
			for _, w := range in.Workers {
				if in.OnDemand[w.InstanceID] && w.Leases > 0 && !w.Draining {
					w.Draining = true
					drain = append(drain, w.InstanceID)
				}
				dec.Workers = append(dec.Workers, w)
			}
		}
		if len(retire) > 0 {
			gone := map[string]bool{}
			for _, v := range retire {
				gone[v.InstanceID] = true
			}
			workers := dec.Workers
			dec.Instances, dec.Workers = nil, nil
			for _, inst := range in.Instances {
				if !gone[inst.ID] {
					dec.Instances = append(dec.Instances, inst)
				}
			}
			for _, w := range workers {
				if !gone[w.InstanceID] {
					dec.Workers = append(dec.Workers, w)
				}
			}
			dec.Desired -= len(retire)
			odHave -= len(retire)
		}
	}
	dec.Expensive = in.OnDemand
	d := Decide(dec)
	odVictims := 0
	for _, v := range d.Victims {
		if in.OnDemand[v.InstanceID] {
			odVictims++
		}
	}
	out := LadderDecision{Decision: d, Rung: RungSpot, Drain: drain}
	out.Victims = append(retire, d.Victims...)
	odAfter := max(0, odHave-odVictims)
	spotAfter := max(0, d.Desired-d.Launch-odAfter)
	if onDemand {
		out.Rung = RungOnDemand
		out.OnDemandDesired = odAfter + d.Launch
		out.SpotDesired = spotAfter + 1 // the probe: one Spot launch kept asked for
		part := fmt.Sprintf("on-demand rung: Spot short for %s (fallback after %s)", round(shortFor), in.After)
		if slo {
			part = fmt.Sprintf("on-demand rung: oldest job waited %s (wait SLO %s), Spot short for %s (fallback after %s)",
				shortDuration(round(in.OldestReadyWait)), shortDuration(in.WaitSLO), round(shortFor), in.After)
		}
		if d.Launch > 0 {
			part += fmt.Sprintf(", launch %d On-Demand", d.Launch)
		}
		out.Reason = out.Reason.With(part)
	} else {
		out.OnDemandDesired, out.SpotDesired = odAfter, spotAfter+d.Launch
		if !in.SpotShortSince.IsZero() {
			part := fmt.Sprintf("Spot short for %s", round(shortFor))
			if in.After > 0 {
				part += fmt.Sprintf(" (fallback after %s)", in.After)
			}
			out.Reason = out.Reason.With(part)
		}
		if len(retire) > 0 {
			out.Reason = out.Reason.With(fmt.Sprintf("terminate %d idle On-Demand (Spot is back)", len(retire)))
		}
		if len(drain) > 0 {
			out.Reason = out.Reason.With(fmt.Sprintf("drain %d busy On-Demand (Spot is back)", len(drain)))
		}
	}
	out.Desired = out.SpotDesired + out.OnDemandDesired
	return out
}

// idleOnDemand picks the On-Demand instances whose workers are idle and
// responsive: once Spot is back they go at once, whatever the grace (an
// idle On-Demand worker kept for the next job would take work Spot can do).
func idleOnDemand(in LadderInput) []Victim {
	var out []Victim
	for _, w := range in.Workers {
		if !in.OnDemand[w.InstanceID] || w.Leases > 0 || w.Draining {
			continue
		}
		if u := in.Settings.Unresponsive; u > 0 && in.Now.Sub(w.LastSeen) > u {
			continue // Decide terminates it as unresponsive
		}
		out = append(out, Victim{InstanceID: w.InstanceID, WorkerID: w.ID, Why: WhyOnDemand})
	}
	return out
}
