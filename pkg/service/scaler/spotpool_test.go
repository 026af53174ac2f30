package scaler_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// poolYAML is cfgYAML with a Spot pool of three, one per pair.
const poolYAML = cfgYAML + `    spot_pool:
      size: 3
      pairs:
        - {instance_type: g5.xlarge, zone: us-east-1a}
        - {instance_type: g5.xlarge, zone: us-east-1b}
        - {instance_type: g5.xlarge, zone: us-east-1c}
`

// newPoolHarness is a harness whose fleet's pool was filled: three
// instances launched (refill), prepared, stopped into the pool.
func newPoolHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarnessWith(t, poolYAML)
	h.tick() // creates
	h.tick() // stops the prepared instances
	h.tick() // records them stopped
	recs := h.poolRecords()
	if len(recs) != 3 {
		t.Fatalf("pool %+v, want three", recs)
	}
	for _, p := range recs {
		if p.State != scaling.PoolStopped {
			t.Fatalf("pool %+v, want every instance stopped", recs)
		}
	}
	if st := h.fleet.Stats(); st.PoolCreated != 3 || st.PoolStarted != 0 {
		t.Fatalf("stats %+v", st)
	}
	return h
}

func (h *harness) poolRecords() []scaling.PoolInstance {
	h.t.Helper()
	recs, _, err := h.sys.Store.ReadPool(h.ctx, "gpu")
	if err != nil {
		h.t.Fatal(err)
	}
	return recs
}

func (h *harness) poolState(id string) scaling.PoolState {
	h.t.Helper()
	p, found, err := h.sys.Store.PoolInstanceOf(h.ctx, "gpu", id)
	if err != nil || !found {
		h.t.Fatalf("pool instance %s: found %v, %v", id, found, err)
	}
	return p.State
}

func (h *harness) machineState(id string) string {
	h.t.Helper()
	ms, _ := h.fleet.DescribePool(h.ctx, "gpu")
	for _, m := range ms {
		if m.ID == id {
			return m.State
		}
	}
	return "gone"
}

// A job on an empty fleet starts a stopped pool instance on enqueue (no
// Spot launch for it); the instance runs the job, and a pool instance
// holding a lease is never stopped — neither while it runs the job nor
// when it takes one just as the tick claims it — and once idle past the
// grace it is stopped back into the pool.
func TestPoolInstanceHoldingALeaseIsNeverStopped(t *testing.T) {
	t.Parallel()
	h := newPoolHarness(t)
	h.submit(1, "a")
	if err := h.waker.Wake(h.ctx, "gpu", 1); err != nil {
		t.Fatal(err)
	}
	var started string
	for _, p := range h.poolRecords() {
		if p.State == scaling.PoolStarting {
			started = p.ID
		}
	}
	if g, _ := h.fleet.Describe(h.ctx, "gpu"); started == "" || g.Desired != 0 || h.fleet.Stats().PoolStarted != 1 {
		t.Fatalf("after the wake: pool %+v, Spot group %+v; want one pool start and no launch", h.poolRecords(), g)
	}
	st, _ := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if len(st.History) == 0 || st.History[0].Reason.Code() != scaling.ReasonPoolStart {
		t.Fatalf("history %+v: want the pool start recorded", st.History)
	}
	h.advance(time.Minute) // the start is a quarter of the boot
	leases := h.leaseAll()
	if l, ok := leases["aa"]; !ok || l.a.WorkerID != "w-"+started {
		t.Fatalf("leases %+v: want job aa on %s", leases, started)
	}
	for range 5 {
		h.advance(time.Minute)
		h.heartbeat(leases)
		r := h.tick()
		if r.Pool == nil || len(r.Pool.Stopped) != 0 || h.machineState(started) != "running" {
			t.Fatalf("busy pool instance: %+v (%s)", r.Pool, r.Reason)
		}
		if g, _ := h.fleet.Describe(h.ctx, "gpu"); g.Desired != 0 {
			t.Fatalf("Spot group %+v for work the pool runs (%s)", g, r.Reason)
		}
	}
	if h.poolState(started) != scaling.PoolRunning {
		t.Fatalf("%s is %s once its worker registered", started, h.poolState(started))
	}
	if err := h.sys.Store.Complete(h.ctx, leases["aa"].a, "aa", leases["aa"].token, nil); err != nil {
		t.Fatal(err)
	}
	// Idle past the grace (polling: seen); the worker takes a job just as
	// the tick claims it: kept running, with its lease.
	h.advance(3 * time.Minute)
	h.leaseAll()
	sc := h.sc
	h.sc = h.scalerOn(&leaseBeforeDrain{Store: h.sys.Store, lease: func(id string) {
		h.submit(1, "late-")
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, a := range h.workers {
			if a.WorkerID == id {
				if _, err := h.sys.Store.LeaseNext(h.ctx, a, []string{"render"}); err != nil {
					t.Errorf("lease by the idle pool worker: %v", err)
				}
			}
		}
	}})
	r := h.tick()
	h.sc = sc
	if r.Pool == nil || !slices.Equal(r.Pool.Kept, []string{started}) || len(r.Pool.Stopped) != 0 || h.machineState(started) != "running" ||
		h.poolState(started) != scaling.PoolRunning || jobStatus(h, "late-a") != job.Leased {
		t.Fatalf("a worker that took work as it was claimed: %+v, machine %s, record %s (%s)", r.Pool, h.machineState(started), h.poolState(started), r.Reason)
	}
	l := h.leaseOf("late-a")
	if err := h.sys.Store.Complete(h.ctx, l.a, "late-a", l.token, nil); err != nil {
		t.Fatal(err)
	}
	h.advance(3 * time.Minute)
	h.leaseAll()
	r = h.tick()
	if r.Pool == nil || !slices.Equal(r.Pool.Stopped, []string{started}) || h.machineState(started) != "stopped" || h.poolState(started) != scaling.PoolStopping {
		t.Fatalf("idle: %+v, machine %s, record %s (%s)", r.Pool, h.machineState(started), h.poolState(started), r.Reason)
	}
	if !strings.Contains(r.Reason.String(), "pool: stop 1") {
		t.Fatalf("reason %q: want the stop in it", r.Reason)
	}
	h.advance(time.Minute)
	h.tick()
	if h.poolState(started) != scaling.PoolStopped || h.fleet.Stats().StoppedBusy != 0 || h.fleet.Stats().PoolStopped != 1 {
		t.Fatalf("after the stop: %s, stats %+v", h.poolState(started), h.fleet.Stats())
	}
	if ws, _ := h.sys.Store.ListWorkers(h.ctx, "gpu"); len(ws) != 0 {
		t.Fatalf("workers %+v after the stop", ws)
	}
}

func jobStatus(h *harness, id string) job.Status {
	h.t.Helper()
	j, err := h.sys.Store.GetJob(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return j.Status
}

// leaseOf answers the lease a job is held under, from the store.
func (h *harness) leaseOf(id string) leaseRef {
	h.t.Helper()
	j, err := h.sys.Store.GetJob(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.workers {
		if a.WorkerID == j.WorkerID {
			return leaseRef{a, j.LeaseToken}
		}
	}
	h.t.Fatalf("no worker holds %s", id)
	return leaseRef{}
}

// A pool instance EC2 stopped on an interruption is marked interrupted at
// the next tick, and no wake or tick of fleetq starts it (EC2 would refuse
// it); once EC2 runs it again it is running in the pool.
func TestEC2StoppedPoolInstanceIsNotStartedByFleetq(t *testing.T) {
	t.Parallel()
	h := newPoolHarness(t)
	victim := h.poolRecords()[0].ID
	if err := h.fleet.InterruptPoolInstance("gpu", victim); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Minute)
	h.tick()
	if h.poolState(victim) != scaling.PoolInterrupted {
		t.Fatalf("%s is %s after EC2 stopped it", victim, h.poolState(victim))
	}
	st, _ := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if !slices.ContainsFunc(st.History, func(d fleetstate.Decision) bool {
		return d.Reason.Code() == scaling.ReasonPoolInterrupted && strings.Contains(d.Reason.String(), victim)
	}) {
		t.Fatalf("history %+v: want the interruption recorded", st.History)
	}
	// Six jobs want three starts: the two others start, the interrupted
	// one is not even tried.
	h.submit(6, "a")
	if err := h.waker.Wake(h.ctx, "gpu", 6); err != nil {
		t.Fatal(err)
	}
	h.tick()
	for _, p := range h.poolRecords() {
		if want := scaling.PoolStarting; p.ID != victim && p.State != want {
			t.Fatalf("pool %+v: want the others starting", h.poolRecords())
		}
	}
	if s := h.fleet.Stats(); s.PoolStarted != 2 || s.PoolRefused != 0 || h.poolState(victim) != scaling.PoolInterrupted || h.machineState(victim) != "stopped" {
		t.Fatalf("stats %+v, %s %s: want two starts, none tried on the interrupted instance", s, victim, h.poolState(victim))
	}
	// EC2 brings it back: running in the pool again.
	if err := h.fleet.ResumePoolInstance("gpu", victim); err != nil {
		t.Fatal(err)
	}
	h.advance(scaler.SpotNotice)
	h.tick()
	if h.poolState(victim) != scaling.PoolRunning {
		t.Fatalf("%s is %s once EC2 ran it again", victim, h.poolState(victim))
	}
}

// A started pool instance whose worker was drained (a failed GPU health
// check) and holds no lease is ended, as a drained group instance is
// terminated, and the pool is refilled.
func TestDrainedPoolInstanceIsEndedAndReplaced(t *testing.T) {
	t.Parallel()
	h := newPoolHarness(t)
	h.submit(1, "a")
	if err := h.waker.Wake(h.ctx, "gpu", 1); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Minute)
	leases := h.leaseAll()
	l, ok := leases["aa"]
	if !ok {
		t.Fatalf("leases %+v", leases)
	}
	started := strings.TrimPrefix(l.a.WorkerID, "w-")
	h.tick()
	if err := h.sys.Store.Complete(h.ctx, l.a, "aa", l.token, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sys.Store.DrainWorker(h.ctx, l.a.WorkerID); err != nil {
		t.Fatal(err)
	}
	r := h.tick()
	if r.Pool == nil || !slices.Equal(r.Pool.Ended, []string{started}) || h.machineState(started) != "gone" {
		t.Fatalf("drained pool instance: %+v, machine %s (%s)", r.Pool, h.machineState(started), r.Reason)
	}
	if _, found, _ := h.sys.Store.PoolInstanceOf(h.ctx, "gpu", started); found {
		t.Fatalf("%s still recorded after its end", started)
	}
	h.tick()
	if s := h.fleet.Stats(); s.PoolCreated != 4 || s.KilledBusy != 0 || len(h.poolRecords()) != 3 {
		t.Fatalf("stats %+v, pool %+v: want one more created to replace it", s, h.poolRecords())
	}
}

// A wake's pool start that EC2 refuses for want of Spot capacity avoids
// its pair and starts a stopped instance on another pair for the same
// jobs: no Spot launch, nothing handed to On-Demand, both decisions
// recorded.
func TestFailedPoolStartTakesAnotherPairsInstanceFirst(t *testing.T) {
	t.Parallel()
	h := newPoolHarness(t)
	short := scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"}
	h.fleet.SetPoolShort(short, true)
	h.submit(2, "a") // one worker's slots: one start, on the first pair
	if err := h.waker.Wake(h.ctx, "gpu", 2); err != nil {
		t.Fatal(err)
	}
	var started []scaling.PoolInstance
	for _, p := range h.poolRecords() {
		if p.State == scaling.PoolStarting {
			started = append(started, p)
		}
	}
	if s := h.fleet.Stats(); s.PoolFailed != 1 || s.PoolStarted != 1 || len(started) != 1 || started[0].Pair == short || started[0].StartFor != 2 {
		t.Fatalf("stats %+v, starting %+v: want the failed start's 2 jobs on another pair's instance", s, started)
	}
	if g, _ := h.fleet.Describe(h.ctx, "gpu"); g.Desired != 0 {
		t.Fatalf("Spot group desired %d: the pool took the jobs", g.Desired)
	}
	_, avoided, _ := h.sys.Store.ReadPool(h.ctx, "gpu")
	st, _ := h.sys.Store.GetFleetState(h.ctx, "gpu")
	if len(avoided) != 1 || !avoided.Avoids(short, h.clock.Now()) || !slices.ContainsFunc(st.History, func(d fleetstate.Decision) bool {
		return d.Reason.Code() == scaling.ReasonPoolFallback && strings.Contains(d.Reason.String(), "its 2 jobs to "+started[0].ID)
	}) || st.History[0].Reason.Code() != scaling.ReasonPoolStart || !strings.Contains(st.History[0].Reason.String(), started[0].ID) {
		t.Fatalf("avoided %v, history %+v: want %s avoided, the failure and the start on another pair recorded", avoided, st.History, short)
	}
}
