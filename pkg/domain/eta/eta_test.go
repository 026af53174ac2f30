package eta

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/lease"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/domain/worker"
)

var now = time.Date(2026, 3, 2, 14, 0, 0, 0, time.UTC)

const boot = 4 * time.Minute

// fleet is a snapshot of a fleet of max instances of one slot, booting in
// four minutes, the scaler's next tick at now, and "render" jobs taking
// ten minutes (one of each in its history, so every sample draws the same).
func fleet(max int) Snapshot {
	return Snapshot{
		Settings: scaling.Settings{Slots: 1, Max: max, IdleWindow: 10 * time.Minute, ScaleInGrace: 5 * time.Minute,
			BootTimeout: 15 * time.Minute, Unresponsive: 3 * time.Minute},
		NextTick: now,
		Boot:     History{boot},
		RunTimes: map[string]History{"render": {10 * time.Minute}},
	}
}

func queued(id, tenant string, age time.Duration) Queued {
	return Queued{Candidate: lease.Candidate{JobID: id, TenantID: tenant, WorkflowID: "render", Created: now.Add(-age)}}
}

// busy adds an instance whose worker runs a render job leased ago.
func (s *Snapshot) busy(id, tenant string, ago time.Duration) {
	s.Instances = append(s.Instances, scaling.Instance{ID: "i-" + id, LifecycleState: scaling.StateInService, FirstSeen: now.Add(-time.Hour)})
	s.Workers = append(s.Workers, Worker{Worker: scaling.Worker{ID: "w-" + id, InstanceID: "i-" + id, Leases: 1, LastSeen: now}})
	s.Running = append(s.Running, Running{JobID: "r-" + id, TenantID: tenant, WorkflowID: "render", WorkerID: "w-" + id, LeasedAt: now.Add(-ago)})
	s.Desired++
}

// idle adds an instance whose worker is idle.
func (s *Snapshot) idle(id string) *Worker {
	s.Instances = append(s.Instances, scaling.Instance{ID: "i-" + id, LifecycleState: scaling.StateInService, FirstSeen: now.Add(-time.Hour)})
	s.Workers = append(s.Workers, Worker{Worker: scaling.Worker{ID: "w-" + id, InstanceID: "i-" + id, LastSeen: now, IdleSince: now.Add(-time.Minute)}})
	s.Desired++
	return &s.Workers[len(s.Workers)-1]
}

// booting adds an instance launched ago, no worker yet.
func (s *Snapshot) booting(id string, ago time.Duration) {
	s.Instances = append(s.Instances, scaling.Instance{ID: "i-" + id, LifecycleState: scaling.StatePending, FirstSeen: now.Add(-ago)})
	s.Desired++
}

func estimate(t *testing.T, s Snapshot, id string) Estimate {
	t.Helper()
	for _, e := range Project(s, now) {
		if e.JobID == id {
			if !e.WaitingOn.Code.Valid() || e.WaitingOn.Text == "" || strings.Contains(e.WaitingOn.Text, "%!") {
				t.Fatalf("estimate %+v: want a valid code and a readable text", e)
			}
			return e
		}
	}
	t.Fatalf("no estimate for %s", id)
	return Estimate{}
}

func want(t *testing.T, e Estimate, code Code, at time.Time, params map[string]string) {
	t.Helper()
	if e.WaitingOn.Code != code || !e.StartAt.Equal(at) {
		t.Fatalf("estimate %+v: want %s starting at %s", e, code, at)
	}
	if at.IsZero() == (e.Basis == BasisProjection) {
		t.Fatalf("estimate %+v: basis %s with start %s", e, e.Basis, at)
	}
	for k, v := range params {
		if e.WaitingOn.Params[k] != v {
			t.Fatalf("estimate %+v: param %s = %q, want %q", e, k, e.WaitingOn.Params[k], v)
		}
	}
}

// Every code has a test that puts a job in its state.
func TestEveryCodeHasItsState(t *testing.T) {
	tested := map[Code]func(*testing.T){
		CodeLeasing: func(t *testing.T) {
			s := fleet(4)
			s.idle("a")
			s.Queued = []Queued{queued("j", "acme", time.Second)}
			want(t, estimate(t, s, "j"), CodeLeasing, now, nil)
		},
		CodeJobsAhead: func(t *testing.T) {
			// A running job ends in a minute, before any launch could boot:
			// the first in line takes its slot, the second the launch.
			s := fleet(4)
			s.busy("a", "acme", 9*time.Minute+30*time.Second)
			s.Queued = []Queued{queued("j1", "acme", 2*time.Second), queued("j2", "acme", time.Second)}
			want(t, estimate(t, s, "j1"), CodeJobsAhead, now.Add(30*time.Second), map[string]string{ParamAhead: "0"})
			want(t, estimate(t, s, "j2"), CodeScaleOutNextTick, now.Add(boot), map[string]string{ParamLaunch: "2"})
		},
		CodeCapacityBooting: func(t *testing.T) {
			s := fleet(4)
			s.booting("a", time.Minute)
			s.Queued = []Queued{queued("j", "acme", time.Second)}
			// Booted for a minute of four.
			want(t, estimate(t, s, "j"), CodeCapacityBooting, now.Add(3*time.Minute), map[string]string{ParamInstances: "1"})
		},
		CodeScaleOutNextTick: func(t *testing.T) {
			s := fleet(4)
			s.NextTick = now.Add(40 * time.Second)
			s.Queued = []Queued{queued("j1", "acme", 2*time.Second), queued("j2", "acme", time.Second)}
			at := now.Add(40 * time.Second)
			for _, id := range []string{"j1", "j2"} {
				want(t, estimate(t, s, id), CodeScaleOutNextTick, at.Add(boot), map[string]string{ParamAt: at.Format(time.RFC3339), ParamLaunch: "2"})
			}
		},
		CodeTenantAtCap: func(t *testing.T) {
			s := fleet(4)
			s.Tenants = func(id string) fleetconfig.Tenant { return fleetconfig.Tenant{ID: id, MaxLeased: 1} }
			s.busy("a", "acme", 5*time.Minute)
			s.idle("b")
			s.Queued = []Queued{queued("j", "acme", time.Second)}
			// The idle worker may not take it: acme's running job ends first.
			want(t, estimate(t, s, "j"), CodeTenantAtCap, now.Add(5*time.Minute), map[string]string{ParamTenant: "acme", ParamMaxLeased: "1", ParamLeased: "1"})
		},
		CodeFleetAtMax: func(t *testing.T) {
			s := fleet(1)
			s.busy("a", "acme", 4*time.Minute)
			s.Queued = []Queued{queued("j", "acme", time.Second)}
			want(t, estimate(t, s, "j"), CodeFleetAtMax, now.Add(6*time.Minute), map[string]string{ParamMax: "1"})
		},
		CodeSpotUnavailable: func(t *testing.T) {
			s := fleet(4)
			s.Spot = &Spot{ShortSince: now.Add(-2 * time.Minute), InstanceType: "g5.xlarge", AZ: "us-east-1a", After: 5 * time.Minute, SpotDesired: 1}
			s.Desired = 1
			s.Queued = []Queued{queued("j", "acme", 3*time.Minute)}
			// The rung comes at the tick 3 minutes on; an On-Demand launch then boots.
			want(t, estimate(t, s, "j"), CodeSpotUnavailable, now.Add(3*time.Minute+boot), map[string]string{
				ParamType: "g5.xlarge", ParamZone: "us-east-1a", ParamNextRung: scaling.RungOnDemand,
				ParamRungAt: now.Add(3 * time.Minute).Format(time.RFC3339)})
		},
		CodeBackoff: func(t *testing.T) {
			s := fleet(4)
			s.idle("a")
			j := queued("j", "acme", time.Minute)
			j.NotBefore = now.Add(2 * time.Minute)
			s.Queued = []Queued{j}
			want(t, estimate(t, s, "j"), CodeBackoff, now.Add(2*time.Minute), map[string]string{ParamUntil: j.NotBefore.Format(time.RFC3339)})
		},
		CodeWorkerApproval: func(t *testing.T) {
			s := fleet(4)
			s.idle("a").Pending = true
			s.Queued = []Queued{queued("j", "acme", time.Second)}
			// The scaler counts the worker as capacity; only an operator can
			// let it lease.
			want(t, estimate(t, s, "j"), CodeWorkerApproval, time.Time{}, map[string]string{ParamPending: "1"})
		},
		CodeQueueDeadlineNear: func(t *testing.T) {
			s := fleet(1)
			s.busy("a", "acme", time.Minute)
			j := queued("j", "acme", time.Minute)
			j.QueueDeadline = now.Add(5 * time.Minute)
			s.Queued = []Queued{j}
			// The slot frees in nine minutes, after the deadline.
			e := estimate(t, s, "j")
			want(t, e, CodeQueueDeadlineNear, time.Time{}, map[string]string{ParamAt: j.QueueDeadline.Format(time.RFC3339)})
			if e.Basis != BasisQueueTimeout {
				t.Fatalf("estimate %+v: want basis %s", e, BasisQueueTimeout)
			}
		},
	}
	for _, c := range Codes {
		f, ok := tested[c]
		if !ok {
			t.Errorf("code %s has no test", c)
			continue
		}
		t.Run(string(c), f)
	}
}

// Each basis, when the estimate cannot be made, names why.
func TestEveryBasisSaysWhy(t *testing.T) {
	cases := []struct {
		basis Basis
		code  Code
		snap  func() Snapshot
		// deadline is the job's queue deadline from now (0: none).
		deadline time.Duration
	}{
		{BasisProjection, CodeScaleOutNextTick, func() Snapshot { return fleet(2) }, 0},
		{BasisNoHistory, CodeScaleOutNextTick, func() Snapshot {
			s := fleet(2)
			s.Boot = nil // no instance has booted yet
			return s
		}, 0},
		{BasisNoHistory, CodeCapacityBooting, func() Snapshot {
			s := fleet(2)
			s.Boot = nil
			s.booting("a", time.Minute)
			return s
		}, 0},
		{BasisAtMaxUnknownRunTimes, CodeFleetAtMax, func() Snapshot {
			s := fleet(1)
			s.busy("a", "acme", time.Minute)
			s.RunTimes = nil // no render job has completed
			return s
		}, 0},
		{BasisAwaitingApproval, CodeWorkerApproval, func() Snapshot {
			s := fleet(1)
			s.idle("a").Pending = true
			return s
		}, 0},
		{BasisSpotShort, CodeSpotUnavailable, func() Snapshot {
			s := fleet(2)
			s.Spot = &Spot{ShortSince: now.Add(-time.Minute), SpotDesired: 1}
			s.Desired = 1
			return s
		}, 0},
		{BasisQueueTimeout, CodeQueueDeadlineNear, func() Snapshot {
			s := fleet(1)
			s.busy("a", "acme", time.Minute)
			return s
		}, time.Minute},
		{BasisBeyondHorizon, CodeFleetAtMax, func() Snapshot {
			s := fleet(1)
			s.busy("a", "acme", time.Minute)
			s.RunTimes = map[string]History{"render": {30 * time.Hour}}
			return s
		}, 0},
	}
	seen := map[Basis]bool{}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s", c.basis, c.code), func(t *testing.T) {
			s := c.snap()
			j := queued("j", "acme", time.Second)
			if c.deadline > 0 {
				j.QueueDeadline = now.Add(c.deadline)
			}
			s.Queued = append(s.Queued, j)
			e := estimate(t, s, "j")
			if e.Basis != c.basis || e.WaitingOn.Code != c.code || (c.basis == BasisProjection) != e.Known() {
				t.Fatalf("estimate %+v: want basis %s, code %s", e, c.basis, c.code)
			}
		})
		seen[c.basis] = true
	}
	for _, b := range []Basis{BasisProjection, BasisNoHistory, BasisAtMaxUnknownRunTimes, BasisAwaitingApproval, BasisSpotShort, BasisQueueTimeout, BasisBeyondHorizon} {
		if !seen[b] {
			t.Errorf("basis %s has no test", b)
		}
	}
}

// For one class of jobs (one priority, one tenant, one workflow) the
// estimates never go back in time along the lease order, and the
// positions run 1, 2, 3, ...
func TestEstimatesAreMonotoneInLeaseOrder(t *testing.T) {
	s := fleet(3)
	s.busy("a", "acme", 2*time.Minute)
	s.busy("b", "acme", 7*time.Minute)
	s.booting("c", 3*time.Minute)
	for i := range 12 {
		s.Queued = append(s.Queued, queued(fmt.Sprintf("j%02d", i), "acme", time.Duration(30-i)*time.Second))
	}
	es := Project(s, now)
	if len(es) != 12 {
		t.Fatalf("%d estimates, want 12", len(es))
	}
	for i, e := range es {
		if e.Position != i+1 || e.JobID != fmt.Sprintf("j%02d", i) || !e.Known() {
			t.Fatalf("estimate %d: %+v", i, e)
		}
		if i > 0 && e.StartAt.Before(es[i-1].StartAt) {
			t.Fatalf("%s starts at %s, before %s ahead of it at %s", e.JobID, e.StartAt, es[i-1].JobID, es[i-1].StartAt)
		}
	}
	// Three slots: the fourth job waits for the first of them to free again.
	if !es[3].StartAt.After(es[2].StartAt) || es[3].WaitingOn.Code != CodeFleetAtMax {
		t.Fatalf("the fourth job: %+v after %+v", es[3], es[2])
	}
}

// Of many running jobs the first to end ends sooner than the earliest of
// their medians: the estimate draws their run times from the history.
func TestTheFirstOfManyRunningJobsEndsBeforeTheirMedian(t *testing.T) {
	s := fleet(8)
	s.RunTimes = map[string]History{"render": {5 * time.Minute, 10 * time.Minute, 15 * time.Minute}}
	for i := range 8 {
		s.busy(fmt.Sprint(i), "acme", 0)
	}
	s.Queued = []Queued{queued("j", "acme", time.Second)}
	e := estimate(t, s, "j")
	if e.WaitingOn.Code != CodeFleetAtMax || !e.StartAt.Equal(now.Add(5*time.Minute)) {
		t.Fatalf("estimate %+v: want the fleet at max until the first of eight jobs ends at the history's shortest run, 5m", e)
	}
	// And the same snapshot gives the same estimates.
	if again := estimate(t, s, "j"); !reflect.DeepEqual(again, e) {
		t.Fatalf("estimates differ: %+v and %+v", e, again)
	}
}

// A draw is one of the durations longer than what has run, less it; past
// them all, one of the overruns above the upper quartile.
func TestHistoryDrawsTheRest(t *testing.T) {
	m := time.Minute
	h := History{9 * m, 1 * m, 5 * m, 3 * m, 7 * m}.sorted() // upper quartile 7m
	first := func(int) int { return 0 }
	last := func(n int) int { return n - 1 }
	for _, c := range []struct {
		elapsed     time.Duration
		pick        func(int) int
		want        time.Duration
		description string
	}{
		{0, first, 1 * m, "the shortest"},
		{0, last, 9 * m, "the longest"},
		{4 * m, first, 1 * m, "5m less the 4m run"},
		{4 * m, last, 5 * m, "9m less the 4m run"},
		{10 * m, first, 2 * m, "past them all: 9m over the 7m quartile"},
	} {
		if got, ok := h.Draw(c.elapsed, c.pick); !ok || got != c.want {
			t.Errorf("%s: drew %s, want %s", c.description, got, c.want)
		}
	}
	if _, ok := History(nil).Draw(0, first); ok {
		t.Error("an empty history drew a duration")
	}
	if got, _ := (History{5 * m, 5 * m}).Draw(6*m, first); got != 0 {
		t.Errorf("past a history of one duration: drew %s, want 0 (it ends at once)", got)
	}
}

// A fleet's boots are its workers' launch-to-registration times, those
// started from a warm pool or unhealthy left out.
func TestBootsOfWorkers(t *testing.T) {
	at := func(m int) time.Time { return now.Add(time.Duration(m) * time.Minute) }
	ws := []worker.Worker{
		{ID: "a", Status: worker.Active, RegisteredAt: at(4), Boot: worker.Boot{LaunchedAt: at(0)}},
		{ID: "b", Status: worker.Draining, RegisteredAt: at(8), Boot: worker.Boot{LaunchedAt: at(3)}},
		{ID: "pool", Status: worker.Active, RegisteredAt: at(1), Boot: worker.Boot{LaunchedAt: at(0), FromPool: true}},
		{ID: "sick", Status: worker.Unhealthy, RegisteredAt: at(9), Boot: worker.Boot{LaunchedAt: at(0)}},
		{ID: "by-hand", Status: worker.Active, RegisteredAt: at(2)},
	}
	if got := Boots(ws); !reflect.DeepEqual(got, History{4 * time.Minute, 5 * time.Minute}) {
		t.Fatalf("boots %v, want 4m and 5m", got)
	}
}

// A workflow with no run of its own is timed by the fleet's runs of any
// workflow.
func TestAWorkflowWithNoRunsTakesTheFleets(t *testing.T) {
	s := fleet(1)
	s.busy("a", "acme", 4*time.Minute)
	s.Running[0].WorkflowID = "new"
	s.RunTimes = map[string]History{"": {10 * time.Minute}}
	s.Queued = []Queued{queued("j", "acme", time.Second)}
	want(t, estimate(t, s, "j"), CodeFleetAtMax, now.Add(6*time.Minute), nil)
}

// A fleet with no group runs on workers started by hand: each one's
// machine is capacity, as the scaler counts it.
func TestWorkersStartedByHandAreCapacity(t *testing.T) {
	s := fleet(4)
	s.Workers = []Worker{{Worker: scaling.Worker{ID: "w-1", InstanceID: "laptop", LastSeen: now}}}
	s.Queued = []Queued{queued("j", "acme", time.Second)}
	want(t, estimate(t, s, "j"), CodeLeasing, now, nil)
}

// Of the samples' starts, the estimate is the one most others fall within
// the tolerance of, not their median; among equals, the nearest the median.
func TestTheEstimateIsWhereMostSamplesAgree(t *testing.T) {
	var starts []time.Time
	for _, s := range []int{60, 70, 80, 240, 480, 720, 960} {
		starts = append(starts, now.Add(time.Duration(s)*time.Second))
	}
	k := densest(starts, func(k int) (time.Time, bool) { return starts[k], true }, now, len(starts)/2)
	if !starts[k].Equal(now.Add(80 * time.Second)) {
		t.Fatalf("estimate %s, want 1m20s from now: three of seven starts lie within a minute of it, the nearest the median of 4m", starts[k].Sub(now))
	}
}

// A queue longer than MaxProjected is projected to its first MaxProjected
// jobs in queue order; each behind them has no start, says so, and keeps
// its place in line.
func TestALongQueueIsProjectedToItsCap(t *testing.T) {
	s := fleet(50)
	for i := range 50 {
		s.busy(fmt.Sprint(i), "t", time.Duration(i)*10*time.Second)
	}
	n := MaxProjected + 30
	for i := range n {
		s.Queued = append(s.Queued, queued(fmt.Sprint("j", i), "t", time.Duration(n-i)*time.Second))
	}
	es := Project(s, now)
	if len(es) != n {
		t.Fatalf("%d estimates for %d queued", len(es), n)
	}
	if e := es[MaxProjected-1]; !e.Known() || e.JobID != fmt.Sprint("j", MaxProjected-1) {
		t.Errorf("the last projected: %+v", e)
	}
	for i, e := range es[MaxProjected:] {
		pos := MaxProjected + i + 1
		if e.Known() || e.Basis != BasisBeyondHorizon || e.Position != pos || e.JobID != fmt.Sprint("j", pos-1) {
			t.Fatalf("beyond the cap: %+v", e)
		}
		if w := e.WaitingOn; w.Code != CodeJobsAhead || w.Params[ParamAhead] != fmt.Sprint(pos-1) || !strings.Contains(w.Text, fmt.Sprint(pos-1, " jobs ahead")) {
			t.Fatalf("beyond the cap waits on %+v", w)
		}
	}
}

// Jobs queued beyond those the snapshot lists (Snapshot.Beyond) count as
// ready work for the scaler's ticks.
func TestJobsBeyondTheSnapshotCountForTheScaler(t *testing.T) {
	s := fleet(40)
	for i := range 10 {
		s.Queued = append(s.Queued, queued(fmt.Sprint("j", i), "t", time.Duration(10-i)*time.Second))
	}
	s.Beyond = 30
	e := estimate(t, s, "j0")
	if w := e.WaitingOn; w.Code != CodeScaleOutNextTick || w.Params[ParamLaunch] != "40" {
		t.Fatalf("waits on %+v, want the tick to launch 40", w)
	}
}

// The texts count in agreement: one instance, two instances.
func TestWaitingOnCountsAgree(t *testing.T) {
	for _, n := range []int{1, 2} {
		s := fleet(n)
		for i := range n {
			s.booting(fmt.Sprint(i), time.Minute)
		}
		s.Boot = nil
		s.Queued = []Queued{queued("j", "t", time.Minute)}
		booting := map[int]string{1: "1 instance booting; the fleet has no boot history to time it by",
			2: "2 instances booting; the fleet has no boot history to time them by"}[n]
		if e := estimate(t, s, "j"); e.WaitingOn.Text != booting {
			t.Errorf("booting: %q, want %q", e.WaitingOn.Text, booting)
		}
		s = fleet(n)
		for i := range n {
			s.busy(fmt.Sprint(i), "t", time.Minute)
		}
		s.Queued = []Queued{queued("j", "t", time.Minute)}
		atMax := map[int]string{1: "the fleet is at its max of 1 instance;", 2: "the fleet is at its max of 2 instances;"}[n]
		if e := estimate(t, s, "j"); !strings.HasPrefix(e.WaitingOn.Text, atMax) {
			t.Errorf("at max: %q, want it to begin %q", e.WaitingOn.Text, atMax)
		}
	}
}
