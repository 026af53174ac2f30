package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

// An estimate reads the fleet's live jobs one by one: the ready queue in
// lease order across shards, the jobs waiting out a backoff with when they
// are due, and the leased jobs with their workers and lease times.
func TestFleetQueueReadsEachLiveJob(t *testing.T) {
	e := newEnv(t)
	e.submit("low", "wf-a", 0)
	e.clock.Advance(time.Second)
	e.submit("high", "wf-a", 5)
	e.clock.Advance(time.Second)
	e.submit("low2", "wf-b", 0)
	e.clock.Advance(time.Second)
	e.submit("runs", "wf-a", 9)
	e.submit("fails", "wf-b", 8)
	w := e.register("w1", "gpu", 2)
	if got := e.lease(w); got.ID != "runs" {
		t.Fatalf("leased %s first", got.ID)
	}
	failed := e.lease(w)
	leasedAt := e.clock.Now()
	if _, err := e.st.Fail(e.ctx, w, failed.ID, failed.LeaseToken, job.Error{Code: "oom", Message: "m", Retryable: true}); err != nil {
		t.Fatal(err)
	}

	queued, running, complete, err := e.st.FleetQueue(e.ctx, "gpu", 0)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, q := range queued {
		order = append(order, q.JobID)
		if q.Ref != nil {
			t.Errorf("%s carries the claim's handle", q.JobID)
		}
	}
	if got := strings.Join(order, ","); got != "high,low,low2,fails" || !complete {
		t.Errorf("queued = %s, want high,low,low2 (priority, then age) and then fails, waiting out its backoff", got)
	}
	for _, q := range queued[:3] {
		if !q.NotBefore.IsZero() {
			t.Errorf("%s is ready, yet not before %s", q.JobID, q.NotBefore)
		}
	}
	if d := queued[3]; !d.NotBefore.Equal(e.clock.Now().Add(2*time.Minute)) || d.Priority != 8 || d.WorkflowID != "wf-b" {
		t.Errorf("delayed = %+v, want fails due in the first backoff, 2m", d)
	}
	if len(running) != 1 || running[0].JobID != "runs" || running[0].WorkerID != "w1" || running[0].WorkflowID != "wf-a" || !running[0].LeasedAt.Equal(leasedAt) {
		t.Errorf("running = %+v", running)
	}
}

// Run times come by workflow from the jobs that succeeded within the
// window, at most perShard of the newest per shard.
func TestRecentRunsByWorkflow(t *testing.T) {
	e := newEnv(t)
	w := e.register("w1", "gpu", 1)
	run := func(id, workflow string, d time.Duration) {
		t.Helper()
		e.submit(id, workflow, 0)
		j := e.lease(w)
		e.clock.Advance(d)
		if err := e.st.Complete(e.ctx, w, j.ID, j.LeaseToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	run("old", "wf-a", time.Hour)
	since := e.clock.Now().Add(time.Millisecond)
	run("a1", "wf-a", 30*time.Second)
	run("a2", "wf-a", 10*time.Second)
	run("b1", "wf-b", 90*time.Second)

	runs, err := e.st.RecentRuns(e.ctx, "gpu", since, 10)
	if err != nil {
		t.Fatal(err)
	}
	if a := runs["wf-a"]; len(a) != 2 || a[0] != 10*time.Second || a[1] != 30*time.Second {
		t.Errorf("wf-a runs = %v, want [10s 30s] (the hour-long one is before the window)", a)
	}
	if b := runs["wf-b"]; len(b) != 1 || b[0] != 90*time.Second {
		t.Errorf("wf-b runs = %v", b)
	}
}

// The snapshot of a fleet: its settings, live jobs, workers (one awaiting
// approval), the instances the last tick saw (booting without a worker),
// the next tick a minute after the last, the recent boots and run times.
func TestEstimateSnapshotReadsTheFleet(t *testing.T) {
	e := newEnv(t)
	launched := e.clock.Now()
	e.clock.Advance(90 * time.Second)
	a := store.WorkerAuth{WorkerID: "w1", Fleet: "gpu", TokenHash: "hash-w1"}
	if _, err := e.st.RegisterWorker(e.ctx, store.Registration{WorkerID: "w1", Fleet: "gpu", Stage: "test", InstanceID: "i-1",
		MaxConcurrency: 1, TokenHash: a.TokenHash, Boot: worker.Boot{LaunchedAt: launched}}); err != nil {
		t.Fatal(err)
	}
	e.submit("j1", "wf-a", 0)
	e.lease(a)
	e.submit("j2", "wf-a", 0)
	tick := e.clock.Now()
	if err := e.record("gpu", fleetstate.Record{
		Decision:  fleetstate.Decision{At: tick, Desired: 2, Reason: scaling.RecordedReason(scaling.ReasonGrow, "grow 1→2")},
		FirstSeen: map[string]time.Time{"i-1": launched, "i-2": tick},
		Boots:     []time.Duration{90 * time.Second, 70 * time.Second},
	}); err != nil {
		t.Fatal(err)
	}

	snap, err := e.st.EstimateSnapshot(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Settings.Max != e.cfg.Fleets[0].MaxInstances || snap.Desired != 2 || !snap.NextTick.Equal(tick.Add(time.Minute)) || snap.Interval != time.Minute {
		t.Errorf("settings %+v, desired %d, next tick %s, interval %s", snap.Settings, snap.Desired, snap.NextTick, snap.Interval)
	}
	if len(snap.Queued) != 1 || snap.Queued[0].JobID != "j2" || len(snap.Running) != 1 || snap.Running[0].JobID != "j1" {
		t.Errorf("queued %+v, running %+v", snap.Queued, snap.Running)
	}
	if len(snap.Workers) != 1 || snap.Workers[0].ID != "w1" || snap.Workers[0].Leases != 1 || snap.Workers[0].Pending {
		t.Errorf("workers = %+v, want w1 with its lease, approved (the fleet needs no approval)", snap.Workers)
	}
	if len(snap.Instances) != 2 || snap.Instances[0].LifecycleState != scaling.StateInService || snap.Instances[1].LifecycleState != scaling.StatePending {
		t.Errorf("instances = %+v, want i-1 in service, i-2 booting", snap.Instances)
	}
	if len(snap.Boot) != 2 || snap.Boot[0] != 70*time.Second || snap.Boot[1] != 90*time.Second {
		t.Errorf("boots = %v, want the recorded 1m10s and 1m30s, sorted", snap.Boot)
	}
	if len(snap.RunTimes) != 0 {
		t.Errorf("run times = %v before any job succeeded", snap.RunTimes)
	}
}

// A fleet with an On-Demand rung is read with its Spot group as the last
// tick recorded it: since when Spot has been short, each group's desired
// capacity, and the instances whose workers registered On-Demand.
func TestEstimateSnapshotReadsTheSpotShortage(t *testing.T) {
	cfg, err := fleetconfig.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Fleets[0].OnDemand.FallbackAfter = fleetconfig.Duration(5 * time.Minute)
	e := newEnvWith(t, cfg)
	if _, err := e.st.RegisterWorker(e.ctx, store.Registration{WorkerID: "od", Fleet: "gpu", Stage: "test", InstanceID: "i-od",
		MaxConcurrency: 1, TokenHash: "hash-od", PurchaseOption: "on-demand"}); err != nil {
		t.Fatal(err)
	}
	e.register("spot", "gpu", 1)
	tick := e.clock.Now()
	if err := e.record("gpu", fleetstate.Record{Decision: fleetstate.Decision{At: tick, Desired: 3, Reason: scaling.RecordedReason(scaling.ReasonGrow, "grow 2→3"),
		Inputs: fleetstate.Inputs{Ladder: &fleetstate.LadderInputs{SpotShortSeconds: 120, SpotDesired: 2, OnDemandDesired: 1}}}}); err != nil {
		t.Fatal(err)
	}
	snap, err := e.st.EstimateSnapshot(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	sp := snap.Spot
	if sp == nil || !sp.ShortSince.Equal(tick.Add(-2*time.Minute)) || sp.After != 5*time.Minute || sp.SpotDesired != 2 || sp.OnDemandDesired != 1 ||
		!sp.OnDemand["i-od"] || sp.OnDemand["i-spot"] {
		t.Fatalf("spot = %+v", sp)
	}
	// Without the rung, one group.
	if snap, err := newEnv(t).st.EstimateSnapshot(e.ctx, "gpu"); err != nil || snap.Spot != nil {
		t.Fatalf("a fleet without an On-Demand rung: spot %+v, %v", snap.Spot, err)
	}
}

// A fleet woken on enqueue, which no tick has seen since: the launches the
// wake asked for are booting since the wake; a worker registered from a
// machine no tick saw yet is in service.
func TestEstimateSnapshotCountsTheLaunchesAskedFor(t *testing.T) {
	e := newEnv(t)
	e.submit("j1", "wf-a", 0)
	woken := e.clock.Now()
	if ok, err := e.st.WakeFleet(e.ctx, "gpu", 1, 3, scaling.WakeReason(1)); !ok || err != nil {
		t.Fatalf("wake: %v, %v", ok, err)
	}
	e.clock.Advance(30 * time.Second)
	e.register("w1", "gpu", 1)
	snap, err := e.st.EstimateSnapshot(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	var inService, booting int
	for _, in := range snap.Instances {
		switch {
		case in.ID == "i-w1" && in.LifecycleState == scaling.StateInService:
			inService++
		case in.LifecycleState == scaling.StatePending && in.FirstSeen.Equal(woken):
			booting++
		}
	}
	if len(snap.Instances) != 3 || inService != 1 || booting != 2 {
		t.Fatalf("instances %+v, want i-w1 in service and 2 booting since the wake", snap.Instances)
	}
}
