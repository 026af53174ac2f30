package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/forecast"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

func TestWakeFleetOnceAcrossConcurrentCallers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := e.st.WakeFleet(e.ctx, "gpu", 2, 2, scaling.WakeReason(2))
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d callers woke the fleet, want exactly 1", won)
	}
	st, err := e.st.GetFleetState(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if st.Desired != 2 || !st.WokenAt.Equal(t0) || !st.LastActiveAt.Equal(t0) {
		t.Fatalf("state after wake: %+v", st)
	}
	// The losers wrote nothing: one decision, once in the history.
	if len(st.History) != 1 || st.LastDecision == nil || st.LastDecision.Reason.String() != "woken by 2 ready jobs" {
		t.Fatalf("decisions after concurrent wakes: last %+v, history %+v", st.LastDecision, st.History)
	}
	// Awake: no second wake until the scaler records zero again.
	if ok, _ := e.st.WakeFleet(e.ctx, "gpu", 5, 3, scaling.WakeReason(5)); ok {
		t.Fatal("woke an awake fleet")
	}
	if err := e.record("gpu", fleetstate.Record{Decision: fleetstate.Decision{At: t0, Desired: 0, Reason: reason("to zero")}}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := e.st.WakeFleet(e.ctx, "gpu", 1, 1, scaling.WakeReason(1)); !ok {
		t.Fatal("a fleet recorded at zero must wake again")
	}
}

// A wake records why the fleet left zero, as its last decision and at the
// head of its history, which stays as long as the scaler keeps it.
func TestWakeFleetRecordsItsDecision(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range fleetstate.DecisionHistory {
		d := fleetstate.Decision{At: t0.Add(-time.Duration(fleetstate.DecisionHistory-i) * time.Minute), Desired: 0, Reason: reason(fmt.Sprintf("hold 0 (%d)", i))}
		if err := e.record("gpu", fleetstate.Record{Decision: d, LastActiveAt: d.At}); err != nil {
			t.Fatal(err)
		}
	}
	ok, err := e.st.WakeFleet(e.ctx, "gpu", 6, 3, scaling.WakeReason(6))
	if err != nil || !ok {
		t.Fatalf("WakeFleet = %v, %v; want a wake", ok, err)
	}
	st, err := e.st.GetFleetState(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	d := st.LastDecision
	if d == nil || d.Reason.String() != "woken by 6 ready jobs" || d.Desired != 3 || !d.At.Equal(t0) {
		t.Fatalf("last decision after a wake: %+v", d)
	}
	want := map[string]int{"ready": 6, "workers": 0, "desired_before": 0, "desired_after": 3}
	if fmt.Sprint(d.Inputs.Map()) != fmt.Sprint(want) {
		t.Fatalf("wake inputs %v, want %v", d.Inputs, want)
	}
	if len(st.History) != fleetstate.DecisionHistory || st.History[0].Reason != d.Reason || st.History[1].Reason.String() != fmt.Sprintf("hold 0 (%d)", fleetstate.DecisionHistory-1) {
		t.Fatalf("history after a wake (%d entries): %+v", len(st.History), st.History)
	}
}

// A fleet already above zero is not woken, and nothing about it is written.
func TestWakeFleetAboveZeroWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rec := fleetstate.Decision{At: t0, Desired: 2, Reason: reason("grow 0→2")}
	if err := e.record("gpu", fleetstate.Record{Decision: rec, LastActiveAt: t0}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if ok, err := e.st.WakeFleet(e.ctx, "gpu", 4, 2, scaling.WakeReason(4)); ok || err != nil {
		t.Fatalf("WakeFleet of an awake fleet = %v, %v", ok, err)
	}
	st, err := e.st.GetFleetState(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if st.LastDecision == nil || st.LastDecision.Reason != rec.Reason || len(st.History) != 1 || !st.WokenAt.IsZero() || !st.LastActiveAt.Equal(t0) {
		t.Fatalf("state of an awake fleet after a wake: %+v", st)
	}
}

// interposer runs before once, just before the next UpdateItem reaches the table.
type interposer struct {
	store.DynamoDB
	before func()
}

func (d *interposer) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if f := d.before; f != nil {
		d.before = nil
		f()
	}
	return d.DynamoDB.UpdateItem(ctx, in, o...)
}

// A decision recorded between a wake's read and its write fails the wake's
// condition; the wake reads again and keeps both decisions, or stops when
// the decision raised the fleet.
func TestWakeFleetRereadsAfterADecisionLandsFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		desired int
		woken   bool
	}{{"still at zero", 0, true}, {"raised meanwhile", 4, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := fleetconfig.Parse("test.yaml", []byte(testConfig))
			if err != nil {
				t.Fatal(err)
			}
			client, table := testenv.DynamoDB(t)
			clk := clock.NewFake(t0)
			o := store.Options{Table: table, Config: cfg, Clock: clk, Logger: slog.New(slog.DiscardHandler)}
			scaler := store.New(client, o)
			db := &interposer{DynamoDB: client}
			waker := store.New(db, o)
			ctx := context.Background()
			rec := fleetstate.Decision{At: t0, Desired: tc.desired, Reason: reason("tick")}
			db.before = func() {
				prev, err := scaler.GetFleetState(ctx, "gpu")
				if err != nil {
					t.Error(err)
				}
				if err := scaler.RecordDecision(ctx, "gpu", fleetstate.Record{Decision: rec, LastActiveAt: t0}, prev); err != nil {
					t.Error(err)
				}
			}
			ok, err := waker.WakeFleet(ctx, "gpu", 3, 2, scaling.WakeReason(3))
			if err != nil || ok != tc.woken {
				t.Fatalf("WakeFleet = %v, %v; want %v", ok, err, tc.woken)
			}
			st, err := scaler.GetFleetState(ctx, "gpu")
			if err != nil {
				t.Fatal(err)
			}
			var reasons []string
			for _, d := range st.History {
				reasons = append(reasons, d.Reason.String())
			}
			want := []string{"tick"}
			if tc.woken {
				want = []string{"woken by 3 ready jobs", "tick"}
			}
			if fmt.Sprint(reasons) != fmt.Sprint(want) || st.LastDecision == nil || st.LastDecision.Reason.String() != want[0] {
				t.Fatalf("history %v, last %+v; want %v", reasons, st.LastDecision, want)
			}
		})
	}
}

// A tick's decision is written on the state it was made from: a wake that
// lands between the tick's read and its write is read again and stays in
// the history, under the tick's decision.
func TestRecordDecisionKeepsAWakeThatLandedFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.record("gpu", fleetstate.Record{Decision: fleetstate.Decision{At: t0, Desired: 0, Reason: reason("no work")}}); err != nil {
		t.Fatal(err)
	}
	prev, err := e.st.GetFleetState(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.st.WakeFleet(e.ctx, "gpu", 2, 1, scaling.WakeReason(2)); err != nil || !ok {
		t.Fatalf("wake: %v, %v", ok, err)
	}
	tick := fleetstate.Decision{At: t0.Add(time.Second), Desired: 1, Reason: reason("2 ready + 0 leased need 1 × 2 slots")}
	if err := e.st.RecordDecision(e.ctx, "gpu", fleetstate.Record{Decision: tick, LastActiveAt: tick.At}, prev); err != nil {
		t.Fatal(err)
	}
	st, err := e.st.GetFleetState(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, d := range st.History {
		reasons = append(reasons, d.Reason.String())
	}
	want := []string{tick.Reason.String(), "woken by 2 ready jobs", "no work"}
	if fmt.Sprint(reasons) != fmt.Sprint(want) || st.LastDecision == nil || st.LastDecision.Reason != tick.Reason {
		t.Fatalf("history %q, last %+v; want %q", reasons, st.LastDecision, want)
	}
	if st.Seq != prev.Seq+2 {
		t.Fatalf("decision sequence %d, want %d (a wake and a tick after %d)", st.Seq, prev.Seq+2, prev.Seq)
	}
}

func TestRecordDecisionKeepsABoundedHistoryOfChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seen := map[string]time.Time{"i-1": t0.Add(-time.Minute)}
	for i := range fleetstate.DecisionHistory + 5 {
		d := fleetstate.Decision{At: t0.Add(time.Duration(i) * time.Minute), Desired: i, Reason: reason(fmt.Sprintf("grow to %d", i))}
		if err := e.record("gpu", fleetstate.Record{Decision: d, LastActiveAt: d.At, FirstSeen: seen}); err != nil {
			t.Fatal(err)
		}
	}
	// The same decision again is not history.
	last := fleetstate.Decision{At: t0.Add(time.Hour), Desired: fleetstate.DecisionHistory + 4, Reason: reason(fmt.Sprintf("grow to %d", fleetstate.DecisionHistory+4))}
	if err := e.record("gpu", fleetstate.Record{Decision: last, LastActiveAt: last.At}); err != nil {
		t.Fatal(err)
	}
	st, err := e.st.GetFleetState(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.History) != fleetstate.DecisionHistory {
		t.Fatalf("history holds %d, want %d", len(st.History), fleetstate.DecisionHistory)
	}
	if st.History[0].Desired != fleetstate.DecisionHistory+4 || !st.History[0].At.Equal(t0.Add(time.Duration(fleetstate.DecisionHistory+4)*time.Minute)) {
		t.Fatalf("newest history entry %+v", st.History[0])
	}
	if st.LastDecision == nil || !st.LastDecision.At.Equal(last.At) || st.Desired != last.Desired || !st.LastActiveAt.Equal(last.At) {
		t.Fatalf("last decision %+v, state %+v", st.LastDecision, st)
	}
	if len(st.FirstSeen) != 0 {
		t.Fatalf("first-seen times not replaced: %v", st.FirstSeen)
	}
}

func TestFleetSnapshotAndRecentOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.register("w1", "gpu", 4)
	e.submit("j1", "wf-a", 0)
	e.clock.Advance(time.Second)
	e.submit("j2", "wf-a", 5)
	e.submit("j3", "wf-b", 0)
	e.submit("j4", "wf-a", 0)
	j := e.lease(a) // j2: highest priority
	e.clock.Advance(90 * time.Second)
	if err := e.st.Complete(e.ctx, a, j.ID, j.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	j = e.lease(a)
	snap, err := e.st.FleetSnapshot(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Ready != 2 || snap.Leased != 1 || snap.LeasesByWorker["w1"] != 1 || !snap.OldestReady.Equal(t0.Add(time.Second)) {
		t.Fatalf("snapshot %+v", snap)
	}
	// The forecast's arrivals: the live jobs created after a time.
	if all, none := snap.ArrivedAfter(t0.Add(-time.Second)), snap.ArrivedAfter(t0.Add(time.Second)); all != 3 || none != 0 {
		t.Fatalf("arrived after t0-1s: %d (want 3), after t0+1s: %d (want 0)", all, none)
	}
	out, err := e.st.RecentOutcomes(e.ctx, "gpu", t0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Succeeded != 1 || out.Dead != 0 || len(out.Runs) != 1 || out.Runs[0] != 90*time.Second {
		t.Fatalf("outcomes %+v", out)
	}
	if out, _ := e.st.RecentOutcomes(e.ctx, "gpu", e.clock.Now().Add(time.Second)); out.Succeeded != 0 {
		t.Fatalf("outcomes after the window: %+v", out)
	}
}

func TestReconcileLeaseCountsLeavesFreshClaimsAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.register("w1", "gpu", 4)
	e.register("w2", "gpu", 4)
	e.submit("j1", "wf-a", 0)
	e.lease(a)
	// The index shows nothing for w1 (as if it lagged): a fresh claim must survive.
	n, err := e.st.ReconcileLeaseCounts(e.ctx, e.workers("gpu"), map[string]int{})
	if err != nil || n != 0 {
		t.Fatalf("reconciled %d, %v; want 0", n, err)
	}
	e.wantLeases("w1", 1)
	e.clock.Advance(store.LeaseCountQuiet + time.Second)
	// Now the index is authoritative: w1 holds one, and a wrong count is set right.
	if n, err := e.st.ReconcileLeaseCounts(e.ctx, e.workers("gpu"), map[string]int{"w1": 1}); err != nil || n != 0 {
		t.Fatalf("reconciled %d, %v; want 0", n, err)
	}
	if n, err := e.st.ReconcileLeaseCounts(e.ctx, e.workers("gpu"), map[string]int{"w1": 1, "w2": 2}); err != nil || n != 1 {
		t.Fatalf("reconciled %d, %v; want 1", n, err)
	}
	e.wantLeases("w2", 2)
}

func TestRemoveStaleWorkersRequeuesTheirLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.register("w1", "gpu", 1)
	e.submit("j1", "wf-a", 0)
	e.lease(a)
	e.clock.Advance(30 * time.Minute)
	e.register("w2", "gpu", 1)
	removed, err := e.st.RemoveStaleWorkers(e.ctx, e.workers("gpu"), e.clock.Now().Add(-20*time.Minute))
	if err != nil || fmt.Sprint(removed) != "[w1]" {
		t.Fatalf("removed %v, %v; want [w1]", removed, err)
	}
	if _, err := e.st.GetWorker(e.ctx, "w1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("stale worker still there: %v", err)
	}
	e.worker("w2")
	j := e.wantStatus("j1", "queued")
	if j.Attempts != 0 {
		t.Fatalf("requeue of a removed worker's lease spent an attempt: %d", j.Attempts)
	}
}

// A worker chosen as a scale-in victim that leases a job in the same instant
// is either not drained or its lease never happened — never both.
func TestDrainAndLeaseRaceNeverBoth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const rounds = 40
	for i := range rounds {
		id := fmt.Sprintf("w%d", i)
		a := e.register(id, "gpu", 1)
		e.submit(fmt.Sprintf("j%d", i), "wf-a", 0)
		var wg sync.WaitGroup
		var drainErr, leaseErr error
		wg.Add(2)
		go func() { defer wg.Done(); drainErr = e.st.DrainIdleWorker(e.ctx, id) }()
		go func() { defer wg.Done(); _, leaseErr = e.st.LeaseNext(e.ctx, a, e.workflows("gpu")) }()
		wg.Wait()
		w := e.worker(id)
		drained, leased := drainErr == nil, leaseErr == nil
		if drained && leased {
			t.Fatalf("round %d: worker drained and leased a job (worker %+v)", i, w)
		}
		if !drained && !leased {
			t.Fatalf("round %d: neither drain (%v) nor lease (%v) happened", i, drainErr, leaseErr)
		}
		if drained && (w.Status != worker.Draining || w.Leases != 0) {
			t.Fatalf("round %d: drained worker reads %+v", i, w)
		}
		if leased && (w.Status != worker.Active || w.Leases != 1) {
			t.Fatalf("round %d: leasing worker reads %+v", i, w)
		}
		// Clear the round: the worker (under the fleet's worker cap) and its job.
		if _, err := e.st.RemoveWorker(e.ctx, id, job.ReasonWorkerGone); err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.Cancel(e.ctx, fmt.Sprintf("j%d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// The forecast's memory rides on the tick's decision write: its hours,
// today's spend and its last tick read back as written, and a decision
// without it (a wake) leaves it alone.
func TestRecordDecisionKeepsTheForecastsMemory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var h forecast.History
	h = h.Observe(t0.Add(-24*time.Hour), 12, 3)
	h = h.Observe(t0, 2, 1)
	mem := fleetstate.Forecast{Hours: h, Budget: forecast.Budget{}.Spend(t0, 2, 10*time.Minute), At: t0}
	d := fleetstate.Decision{At: t0, Desired: 2, Reason: reason("forecast")}
	if err := e.record("gpu", fleetstate.Record{Decision: d, LastActiveAt: t0, Forecast: &mem}); err != nil {
		t.Fatal(err)
	}
	d2 := fleetstate.Decision{At: t0.Add(time.Minute), Desired: 3, Reason: reason("no forecast in this record")}
	if err := e.record("gpu", fleetstate.Record{Decision: d2, LastActiveAt: t0}); err != nil {
		t.Fatal(err)
	}
	st, err := e.st.GetFleetState(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	got := st.Forecast
	if len(got.Hours) != 2 || got.Hours[forecast.HourOf(t0.Add(-24*time.Hour))] != (forecast.Hour{Arrivals: 12, Work: 3, Ticks: 1}) ||
		got.Budget != mem.Budget || got.Budget.Spent != 20*time.Minute || !got.At.Equal(t0) {
		t.Fatalf("forecast memory %+v, want %+v", got, mem)
	}
	if e := forecast.Expect(got.Hours, t0, 7); e.Days != 1 || e.Arrivals != 12 {
		t.Fatalf("expectation from the stored hours: %+v", e)
	}
}

// reason is a decision's reason as a record holds it, for decisions the
// tests write themselves.
func reason(text string) scaling.Reason { return scaling.RecordedReason("", text) }
