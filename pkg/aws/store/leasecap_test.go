package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/local/faultproxy"
)

const cappedTenants = "  - id: capped\n    max_leased: %d\n  - id: free\n"

func (e *env) leasedSlots(tenant string) int {
	e.t.Helper()
	n, err := e.st.TenantLeasedJobs(e.ctx, tenant)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// leasedOf counts a tenant's leased jobs as the jobs themselves say.
func (e *env) leasedOf(tenant string) int {
	e.t.Helper()
	js, err := e.st.ListJobs(e.ctx, "gpu", job.Leased, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, j := range js {
		if j.TenantID == tenant {
			n++
		}
	}
	return n
}

// Twenty pollers at once (two on each of ten workers, the fleet's worker
// cap) never lease more of a capped tenant's jobs than its cap, and still
// lease every other tenant's job.
func TestMaxLeasedHoldsUnderConcurrentPollers(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, fmt.Sprintf(cappedTenants, 3), 100)
	e.queue("capped", 30)
	e.queue("free", 10)
	var workers []store.WorkerAuth
	for i := range 10 {
		a := e.register(fmt.Sprintf("w%02d", i), "gpu", 4)
		workers = append(workers, a, a)
	}
	var mu sync.Mutex
	leased := map[string]int{}
	var wg sync.WaitGroup
	for _, a := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j, err := e.st.LeaseNext(e.ctx, a, e.workflows("gpu"))
				if errors.Is(err, store.ErrNoJob) {
					return
				}
				if err != nil && !errors.Is(err, store.ErrContention) {
					t.Errorf("LeaseNext(%s): %v", a.WorkerID, err)
					return
				}
				if err == nil {
					mu.Lock()
					leased[j.TenantID]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if leased["capped"] != 3 || leased["free"] != 10 {
		t.Fatalf("leased %v; want capped 3 (its cap) and free 10", leased)
	}
	if got, slots := e.leasedOf("capped"), e.leasedSlots("capped"); got != 3 || slots != 3 {
		t.Fatalf("capped holds %d leased jobs, its counter says %d; want 3 and 3", got, slots)
	}
}

// A poll that meets only a capped tenant's jobs, at its cap, answers no
// job; the moment one of its leases ends, the next poll leases its next job.
func TestCappedTenantLeasesAgainAsSoonAsALeaseEnds(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, fmt.Sprintf(cappedTenants, 2), 100)
	e.queue("capped", 5)
	a := e.register("w1", "gpu", fleetconfig.MaxSlots)
	j1, j2 := e.lease(a), e.lease(a)
	e.noLease(a, store.ErrNoJob)
	if err := e.st.Complete(e.ctx, a, j1.ID, j1.LeaseToken, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	// No time passes: the census of this process is still fresh.
	if j := e.lease(a); j.TenantID != "capped" {
		t.Fatalf("leased %+v after a lease ended", j)
	}
	e.noLease(a, store.ErrNoJob)
	if n := e.leasedSlots("capped"); n != 2 {
		t.Fatalf("counter %d, want 2", n)
	}
	_ = j2
}

// Every way a lease ends gives its slot back: after each, the counter is
// at 0 and the tenant's next job is leased at once.
func TestEveryLeaseEndGivesTheSlotBack(t *testing.T) {
	t.Parallel()
	ends := map[string]func(e *env, a store.WorkerAuth, j job.Job){
		"complete": func(e *env, a store.WorkerAuth, j job.Job) {
			must(t, e.st.Complete(e.ctx, a, j.ID, j.LeaseToken, json.RawMessage(`{}`)))
		},
		"fail": func(e *env, a store.WorkerAuth, j job.Job) {
			_, err := e.st.Fail(e.ctx, a, j.ID, j.LeaseToken, job.Error{Code: "x", Retryable: true})
			must(t, err)
		},
		"fail_dead": func(e *env, a store.WorkerAuth, j job.Job) {
			_, err := e.st.Fail(e.ctx, a, j.ID, j.LeaseToken, job.Error{Code: "x"})
			must(t, err)
		},
		"requeue": func(e *env, a store.WorkerAuth, j job.Job) {
			_, err := e.st.Requeue(e.ctx, a, j.ID, j.LeaseToken, job.SpotInterruption)
			must(t, err)
		},
		"cancel": func(e *env, a store.WorkerAuth, j job.Job) {
			_, err := e.st.Cancel(e.ctx, j.ID)
			must(t, err)
		},
		"expiry": func(e *env, a store.WorkerAuth, j job.Job) {
			e.clock.Advance(3 * time.Minute) // past lease_seconds: 120
			r, err := e.st.Sweep(e.ctx, "gpu")
			must(t, err)
			if r.Leases.Requeued != 1 {
				t.Fatalf("sweep %+v, want one requeued", r)
			}
		},
		"interruption": func(e *env, a store.WorkerAuth, j job.Job) {
			n, err := e.st.RequeueWorkerLeases(e.ctx, a.WorkerID, job.SpotInterruption.Reason())
			must(t, err)
			if n != 1 {
				t.Fatalf("requeued %d, want 1", n)
			}
		},
		"deregister": func(e *env, a store.WorkerAuth, j job.Job) {
			must(t, e.st.DeregisterWorker(e.ctx, a))
		},
		"remove": func(e *env, a store.WorkerAuth, j job.Job) {
			_, err := e.st.RemoveWorker(e.ctx, a.WorkerID, job.ScaleIn.Reason())
			must(t, err)
		},
		"revoke": func(e *env, a store.WorkerAuth, j job.Job) {
			_, err := e.st.RevokeWorker(e.ctx, a.WorkerID)
			must(t, err)
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			e := newFairEnv(t, fmt.Sprintf(cappedTenants, 1), 100)
			e.queue("capped", 3)
			a := e.register("w1", "gpu", fleetconfig.MaxSlots)
			j := e.lease(a)
			e.noLease(a, store.ErrNoJob)
			if n := e.leasedSlots("capped"); n != 1 {
				t.Fatalf("counter %d with one lease, want 1", n)
			}
			end(e, a, j)
			if n := e.leasedSlots("capped"); n != 0 {
				t.Fatalf("counter %d after %s, want 0", n, name)
			}
			b := e.register("w2", "gpu", fleetconfig.MaxSlots)
			if next := e.lease(b); next.TenantID != "capped" {
				t.Fatalf("leased %+v after %s", next, name)
			}
			if n := e.leasedSlots("capped"); n != 1 {
				t.Fatalf("counter %d after the next lease, want 1", n)
			}
		})
	}
}

// An attempt that runs past its timeout ends its lease, and the slot with it.
func TestRunTimeoutGivesTheSlotBack(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, fmt.Sprintf(cappedTenants, 1), 100)
	if _, _, err := e.st.CreateJob(e.ctx, job.Spec{ID: "slow", TenantID: "capped", WorkflowID: "wf-a", TimeoutSeconds: 60, Input: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	e.queue("capped", 1)
	a := e.register("w1", "gpu", fleetconfig.MaxSlots)
	j := e.lease(a)
	if j.ID != "slow" {
		t.Fatalf("leased %s first, want slow", j.ID)
	}
	e.clock.Advance(61 * time.Second)
	if _, err := e.st.Heartbeat(e.ctx, a, j.ID, j.LeaseToken, nil); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("heartbeat past the run timeout = %v, want ErrLeaseLost", err)
	}
	if n := e.leasedSlots("capped"); n != 0 {
		t.Fatalf("counter %d after the run timeout, want 0", n)
	}
}

// The poll's own undo (it could not read the job it claimed) gives the
// slot back with the claim.
func TestUndoneClaimGivesTheSlotBack(t *testing.T) {
	t.Parallel()
	e, p := newFaultyEnvWith(t, testConfig+"tenants:\n"+fmt.Sprintf(cappedTenants, 1))
	e.queue("capped", 2)
	w := e.register("w1", "gpu", 2)
	stop := failEvery(p, "GetItem", faultproxy.Unavailable)
	_, err := e.st.LeaseNext(e.ctx, w, e.workflows("gpu"))
	stop()
	if err == nil || errors.Is(err, store.ErrNoJob) {
		t.Fatalf("LeaseNext with every read failing = %v; want the read's error", err)
	}
	if n := e.leasedSlots("capped"); n != 0 {
		t.Fatalf("counter %d after the undone claim, want 0", n)
	}
	if j := e.lease(w); j.TenantID != "capped" {
		t.Fatalf("next poll leased %+v", j)
	}
}

// Leases of uncapped tenants write no counter.
func TestUncappedTenantsHoldNoSlot(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, fmt.Sprintf(cappedTenants, 1), 100)
	e.queue("free", 3)
	a := e.register("w1", "gpu", fleetconfig.MaxSlots)
	for range 3 {
		e.lease(a)
	}
	if n := e.leasedSlots("free"); n != 0 {
		t.Fatalf("free's counter %d, want none", n)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
