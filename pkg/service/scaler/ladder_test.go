package scaler_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

const (
	spotGroup = "fleetq-test-gpu"
	odGroup   = "fleetq-test-gpu-on-demand"
)

// ladderHarness is the scaler's harness on two groups of the fake Auto
// Scaling API (real SDK client): a Spot group whose launches fail until
// capacity is switched back on, and an On-Demand group that launches.
type ladderHarness struct {
	*harness
	srv *localaws.AutoScaling
}

func newLadderHarness(t *testing.T, fallbackAfter time.Duration) *ladderHarness {
	t.Helper()
	h := newHarness(t)
	h.sys.Store.Config().Fleets[0].OnDemand.FallbackAfter = fleetconfig.Duration(fallbackAfter)
	srv, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	srv.SetClock(h.clock.Now)
	for _, g := range []string{spotGroup, odGroup} {
		srv.PutGroup(localaws.ASGGroup{Name: g, Min: 0, Max: 5, NewInstancesProtected: true})
	}
	srv.SetCapacity(spotGroup, false)
	srv.SetCapacity(odGroup, true)
	ad := asg.New(autoscaling.NewFromConfig(localaws.Config(srv.URL), asg.WithoutSDKRetries), asg.Options{Sleep: func(context.Context, time.Duration) error { return nil }})
	h.configure(func(c *scaler.Config) {
		c.Capacity = scaler.Groups{Adapter: ad, Names: map[string]string{"gpu": spotGroup}, OnDemandNames: map[string]string{"gpu": odGroup}}
	})
	return &ladderHarness{harness: h, srv: srv}
}

// registerNew registers a worker for every instance of the groups that has
// none (the agent of a booted instance).
func (h *ladderHarness) registerNew() {
	h.t.Helper()
	for _, name := range []string{spotGroup, odGroup} {
		g, _ := h.srv.Group(name)
		for _, in := range g.Instances {
			if _, ok := h.workers[in.ID]; ok {
				continue
			}
			a := worker.Auth{WorkerID: "w-" + in.ID, Fleet: "gpu", TokenHash: "h-" + in.ID}
			if _, err := h.sys.Store.RegisterWorker(h.ctx, worker.Registration{WorkerID: a.WorkerID, Fleet: "gpu", Stage: "test", InstanceID: in.ID, MaxConcurrency: 2, TokenHash: a.TokenHash}); err != nil {
				h.t.Fatal(err)
			}
			h.workers[in.ID] = a
		}
	}
}

// minute is one minute of the fleet: the workers poll, the Spot group
// retries its launches as a real group does, then the scaler ticks.
func (h *ladderHarness) minute() scaler.FleetReport {
	h.clock.Advance(time.Minute)
	for _, a := range h.workers {
		_ = h.sys.Store.TouchWorker(h.ctx, a) // a terminated instance's worker is gone
	}
	h.srv.Fill(spotGroup)
	h.srv.Fill(odGroup)
	return h.tick()
}

func ids(g localaws.ASGGroup) []string {
	var out []string
	for _, in := range g.Instances {
		out = append(out, in.ID)
	}
	return out
}

// Spot launches fail for longer than fallback_after: the next launches go
// to the On-Demand group and the decision says so. Spot comes back: the
// idle On-Demand instance is terminated, the busy one drained, and new
// launches go to Spot.
func TestLadderFallsBackToOnDemandAndReturnsToSpot(t *testing.T) {
	t.Parallel()
	h := newLadderHarness(t, 5*time.Minute)
	h.submit(4, "a")
	r := h.tick()
	if r.Ladder == nil || r.Ladder.Rung != scaling.RungSpot || h.srv.Desired(spotGroup) != 2 || h.srv.Desired(odGroup) != 0 {
		t.Fatalf("first tick: ladder %+v, spot desired %d, on-demand desired %d", r.Ladder, h.srv.Desired(spotGroup), h.srv.Desired(odGroup))
	}
	shortAt := h.clock.Now()
	// Short for less than fallback_after: still waiting for Spot.
	for range 4 {
		r = h.minute()
		if r.Ladder.Rung != scaling.RungSpot || h.srv.Desired(odGroup) != 0 {
			t.Fatalf("at %s: rung %s, on-demand desired %d before fallback_after", h.clock.Now().Sub(shortAt), r.Ladder.Rung, h.srv.Desired(odGroup))
		}
		if !r.Ladder.SpotShortSince.Equal(shortAt) || !strings.Contains(r.Decision.Reason.String(), "Spot short for") {
			t.Fatalf("short since %v (want %v), reason %q", r.Ladder.SpotShortSince, shortAt, r.Decision.Reason)
		}
	}
	r = h.minute()
	if r.Ladder.Rung != scaling.RungOnDemand || h.srv.Desired(odGroup) != 2 {
		t.Fatalf("after fallback_after: rung %s, on-demand desired %d, reason %q", r.Ladder.Rung, h.srv.Desired(odGroup), r.Decision.Reason)
	}
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	dec := st.LastDecision
	if dec == nil || !strings.Contains(dec.Reason.String(), "on-demand rung: Spot short for 5m") || !strings.Contains(dec.Reason.String(), "launch 2 On-Demand") ||
		dec.Inputs.Map()["on_demand_rung"] != 1 || dec.Inputs.Map()["spot_short_seconds"] != 300 || dec.Inputs.Map()["on_demand_desired"] != 2 {
		t.Fatalf("recorded decision %+v", dec)
	}
	// The Spot group keeps one launch asked for, so Spot's return is seen.
	if d := h.srv.Desired(spotGroup); d != 1 {
		t.Fatalf("spot desired on the on-demand rung = %d, want 1 (the probe)", d)
	}
	od, _ := h.srv.Group(odGroup)
	if len(od.Instances) != 2 {
		t.Fatalf("on-demand instances %+v", od.Instances)
	}
	h.registerNew()
	leases := h.leaseAll()
	if len(leases) != 4 {
		t.Fatalf("%d leases, want 4", len(leases))
	}
	// One On-Demand worker finishes its jobs; the other stays busy.
	idle := "w-" + od.Instances[0].ID
	for id, l := range leases {
		if l.a.WorkerID == idle {
			if err := h.sys.Store.Complete(h.ctx, l.a, id, l.token, nil); err != nil {
				t.Fatal(err)
			}
			delete(leases, id)
		}
	}
	h.heartbeat(leases)
	r = h.minute()
	if r.Ladder.Rung != scaling.RungOnDemand || len(r.Terminated) != 0 {
		t.Fatalf("still short: rung %s, terminated %v", r.Ladder.Rung, r.Terminated)
	}
	if st, err := h.sys.Store.GetFleetState(h.ctx, "gpu"); err != nil || st.LastDecision.InService != 2 {
		t.Fatalf("recorded in service %+v, %v: want both On-Demand instances", st.LastDecision, err)
	}

	// Spot is back: the group's next try launches.
	h.srv.SetCapacity(spotGroup, true)
	h.heartbeat(leases)
	r = h.minute()
	if r.Ladder.Rung != scaling.RungSpot || !r.Ladder.SpotShortSince.IsZero() {
		t.Fatalf("spot back: rung %s, short since %v", r.Ladder.Rung, r.Ladder.SpotShortSince)
	}
	if !slices.Equal(r.Terminated, []string{od.Instances[0].ID}) || !strings.Contains(r.Decision.Reason.String(), "terminate 1 idle On-Demand (Spot is back)") {
		t.Fatalf("terminated %v, reason %q", r.Terminated, r.Decision.Reason)
	}
	busy := od.Instances[1].ID
	if !slices.Equal(r.Ladder.Drained, []string{busy}) || !strings.Contains(r.Decision.Reason.String(), "drain 1 busy On-Demand") {
		t.Fatalf("drained %v, reason %q", r.Ladder.Drained, r.Decision.Reason)
	}
	if w, err := h.sys.Store.GetWorker(h.ctx, "w-"+busy); err != nil || w.Status != worker.Draining {
		t.Fatalf("busy On-Demand worker %+v, %v", w, err)
	}
	if g, _ := h.srv.Group(odGroup); !slices.Equal(ids(g), []string{busy}) || g.Desired != 1 {
		t.Fatalf("on-demand group after Spot came back: %+v", g)
	}

	// New work launches on Spot, never On-Demand.
	h.registerNew()
	h.submit(4, "b")
	spotBefore := h.srv.Desired(spotGroup)
	h.heartbeat(leases)
	r = h.minute()
	if h.srv.Desired(spotGroup) <= spotBefore || h.srv.Desired(odGroup) != 1 || r.Ladder.Rung != scaling.RungSpot {
		t.Fatalf("new work: spot desired %d (was %d), on-demand desired %d, rung %s", h.srv.Desired(spotGroup), spotBefore, h.srv.Desired(odGroup), r.Ladder.Rung)
	}
}

// A fleet without on_demand keeps its one group: no activities read, the
// On-Demand group never touched.
func TestLadderOffKeepsOneGroup(t *testing.T) {
	t.Parallel()
	h := newLadderHarness(t, 0)
	h.submit(4, "a")
	for range 10 {
		if r := h.minute(); r.Ladder != nil {
			t.Fatalf("ladder report without on_demand: %+v", r.Ladder)
		}
	}
	if n := h.srv.CallCount("DescribeScalingActivities"); n != 0 {
		t.Fatalf("%d DescribeScalingActivities without on_demand", n)
	}
	if h.srv.Desired(spotGroup) != 2 || h.srv.Desired(odGroup) != 0 {
		t.Fatalf("spot desired %d, on-demand desired %d", h.srv.Desired(spotGroup), h.srv.Desired(odGroup))
	}
}

// With on_demand.wait_slo, launches move to On-Demand as soon as Spot is
// short and the oldest ready job has waited past it, well before
// fallback_after; the decision says which rule moved them.
func TestLadderWaitSLOMovesToOnDemandBeforeFallbackAfter(t *testing.T) {
	t.Parallel()
	h := newLadderHarness(t, 30*time.Minute)
	h.sys.Store.Config().Fleets[0].OnDemand.WaitSLO = fleetconfig.Duration(3 * time.Minute)
	h.submit(4, "a")
	h.tick()
	for m := 1; m <= 3; m++ {
		if r := h.minute(); r.Ladder.Rung != scaling.RungSpot || h.srv.Desired(odGroup) != 0 {
			t.Fatalf("minute %d: rung %s before the wait SLO passed (%q)", m, r.Ladder.Rung, r.Decision.Reason)
		}
	}
	h.minute()
	st, err := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	d := st.LastDecision
	if h.srv.Desired(odGroup) != 2 || d.Inputs.Map()["on_demand_rung"] != 1 ||
		!strings.Contains(d.Reason.String(), "on-demand rung: oldest job waited 4m (wait SLO 3m), Spot short for 4m0s (fallback after 30m0s), launch 2 On-Demand") {
		t.Fatalf("on-demand desired %d, decision %q %v", h.srv.Desired(odGroup), d.Reason, d.Inputs)
	}
}

// A job preempted to the cap in a fleet with an On-Demand rung is pinned to
// On-Demand workers: the snapshot counts it and the tick launches an
// On-Demand instance for it although Spot is not short; only that
// instance's worker leases it, and the instance is kept while it runs.
func TestJobsPreemptedToTheCapGetOnDemandCapacity(t *testing.T) {
	t.Parallel()
	h := newLadderHarness(t, 10*time.Minute)
	h.sys.Store.Config().Fleets[0].PreemptionCap = 1
	h.srv.SetCapacity(spotGroup, true)
	h.submit(1, "p")
	h.tick()
	h.minute()
	h.registerNew()
	spot := h.workers[ids(mustGroup(t, h.srv, spotGroup))[0]]
	for range 2 { // the second preemption is past the cap
		if j, err := h.sys.Store.LeaseNext(h.ctx, spot, []string{"render"}); err != nil || j.ID != "pa" {
			t.Fatalf("spot lease: %q, %v", j.ID, err)
		}
		if n, err := h.sys.Store.RequeueWorkerLeases(h.ctx, spot.WorkerID, job.SpotInterruption.Reason()); err != nil || n != 1 {
			t.Fatalf("requeue: %d, %v", n, err)
		}
	}
	if j, err := h.sys.Store.GetJob(h.ctx, "pa"); err != nil || !j.OnDemandOnly {
		t.Fatalf("job after the cap: %+v, %v; want on_demand_only", j, err)
	}
	snap, err := h.sys.Store.FleetSnapshot(h.ctx, "gpu")
	if err != nil || snap.Ready != 1 || snap.OnDemandOnlyReady != 1 || snap.OnDemandOnlyLeased != 0 {
		t.Fatalf("snapshot %+v, %v: want the pinned job counted ready", snap, err)
	}

	r := h.minute()
	if h.srv.Desired(odGroup) != 1 || !strings.Contains(r.Decision.Reason.String(), "1 jobs preempted to the cap keep 1 On-Demand") {
		t.Fatalf("on-demand desired %d, reason %q: want one On-Demand instance for the pinned job", h.srv.Desired(odGroup), r.Decision.Reason)
	}
	if _, err := h.sys.Store.LeaseNext(h.ctx, spot, []string{"render"}); err == nil {
		t.Fatal("a Spot worker leased the pinned job")
	}
	h.minute()
	odInst := ids(mustGroup(t, h.srv, odGroup))
	if len(odInst) != 1 {
		t.Fatalf("on-demand instances %v", odInst)
	}
	od := worker.Auth{WorkerID: "w-" + odInst[0], Fleet: "gpu", TokenHash: "h-" + odInst[0]}
	if _, err := h.sys.Store.RegisterWorker(h.ctx, worker.Registration{WorkerID: od.WorkerID, Fleet: "gpu", Stage: "test", InstanceID: odInst[0],
		MaxConcurrency: 2, TokenHash: od.TokenHash, PurchaseOption: "on-demand"}); err != nil {
		t.Fatal(err)
	}
	h.workers[odInst[0]] = od
	j, err := h.sys.Store.LeaseNext(h.ctx, od, []string{"render"})
	if err != nil || j.ID != "pa" {
		t.Fatalf("On-Demand lease: %q, %v", j.ID, err)
	}
	h.heartbeat(map[string]leaseRef{"pa": {od, j.LeaseToken}})
	r = h.minute()
	if h.srv.Desired(odGroup) != 1 || r.Snapshot.OnDemandOnlyLeased != 1 {
		t.Fatalf("while the pinned job runs: on-demand desired %d, pinned leased %d", h.srv.Desired(odGroup), r.Snapshot.OnDemandOnlyLeased)
	}
}

func mustGroup(t *testing.T, srv *localaws.AutoScaling, name string) localaws.ASGGroup {
	t.Helper()
	g, ok := srv.Group(name)
	if !ok {
		t.Fatalf("no group %s", name)
	}
	return g
}
