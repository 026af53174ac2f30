package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

func newTenantEnv(t *testing.T, cap int) *env {
	t.Helper()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(testConfig+fmt.Sprintf("tenants:\n  - id: capped\n    max_queued: %d\n", cap)))
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, cfg)
}

// accept accepts a submission of the tenant's job id as the API does
// before queuing it (AcceptJob).
func (e *env) accept(tenant, id string) (bool, error) {
	e.t.Helper()
	_, ok, err := e.st.AcceptJob(e.ctx, job.Spec{ID: id, TenantID: tenant, WorkflowID: "wf-a", Input: json.RawMessage(`{}`)}, false)
	return ok, err
}

func (e *env) open(tenant string) int {
	e.t.Helper()
	n, err := e.st.TenantOpenJobs(e.ctx, tenant)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) create(tenant, id string) {
	e.t.Helper()
	_, created, err := e.st.CreateJob(e.ctx, job.Spec{ID: id, TenantID: tenant, WorkflowID: "wf-a", Input: json.RawMessage(`{}`)})
	if err != nil || !created {
		e.t.Fatalf("CreateJob(%s) = %v, %v", id, created, err)
	}
}

func TestTenantSlotsFollowTheJobsLife(t *testing.T) {
	t.Parallel()
	e := newTenantEnv(t, 2)
	for _, id := range []string{"a", "b"} {
		took, err := e.accept("capped", id)
		if err != nil || !took {
			t.Fatalf("Accept(%s) = %v, %v", id, took, err)
		}
	}
	// A repeat of a reserved id takes nothing and is not refused.
	if took, err := e.accept("capped", "a"); err != nil || took {
		t.Fatalf("repeat Accept(a) = %v, %v; want a repeat", took, err)
	}
	_, err := e.accept("capped", "c")
	var qe *store.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, store.ErrOverQuota) || qe.Cap != 2 || qe.Open != 2 {
		t.Fatalf("Accept(c) over the cap = %v; want a QuotaError with cap 2, open 2", err)
	}
	if _, err := e.st.GetJob(e.ctx, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused job exists: %v", err)
	}
	// Creating the jobs hands them the slots: the count stays 2, a
	// redelivered creation counts nothing.
	e.create("capped", "a")
	e.create("capped", "b")
	if _, created, err := e.st.CreateJob(e.ctx, job.Spec{ID: "a", TenantID: "capped", WorkflowID: "wf-a", Input: json.RawMessage(`{}`)}); err != nil || created {
		t.Fatalf("repeat CreateJob(a) = %v, %v", created, err)
	}
	if got := e.open("capped"); got != 2 {
		t.Fatalf("open after creation = %d, want 2", got)
	}
	// A reservation of an existing job is a repeat.
	if took, err := e.accept("capped", "a"); err != nil || took {
		t.Fatalf("Accept(a) after creation = %v, %v; want a repeat", took, err)
	}
	// An outcome gives the slot back when its event is relayed, once.
	if _, err := e.st.Cancel(e.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := e.open("capped"); got != 2 {
		t.Fatalf("open before the relay = %d, want 2", got)
	}
	rec := &recorder{}
	for range 2 {
		if _, err := e.st.RelayJob(e.ctx, rec, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.open("capped"); got != 1 {
		t.Fatalf("open after the relayed cancel = %d, want 1", got)
	}
	if took, err := e.accept("capped", "c"); err != nil || !took {
		t.Fatalf("Accept(c) with a free slot = %v, %v", took, err)
	}
	// A job withdrawn before it was queued frees its slot; twice is once.
	for range 2 {
		if err := e.st.WithdrawJob(e.ctx, "capped", "c"); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.open("capped"); got != 1 {
		t.Fatalf("open after the withdrawal = %d, want 1", got)
	}
	if _, err := e.st.GetJob(e.ctx, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the withdrawn job is still there: %v", err)
	}
}

func TestTenantSlotsOfDeadJobsComeBackWithARetry(t *testing.T) {
	t.Parallel()
	e := newTenantEnv(t, 5)
	// Without a reservation (cap set after acceptance) creation counts.
	e.create("capped", "d")
	e.create("free", "f")
	if got := e.open("capped"); got != 1 {
		t.Fatalf("open = %d, want 1", got)
	}
	if got := e.open("free"); got != 0 {
		t.Fatalf("an uncapped tenant is counted: %d", got)
	}
	w := e.register("w1", "gpu", 1)
	j := e.lease(w)
	if _, err := e.st.Fail(e.ctx, w, j.ID, j.LeaseToken, job.Error{Code: "boom", Message: "no", Retryable: false}); err != nil {
		t.Fatal(err)
	}
	e.wantStatus("d", job.Dead)
	if _, err := e.st.RelayJob(e.ctx, &recorder{}, "d"); err != nil {
		t.Fatal(err)
	}
	if got := e.open("capped"); got != 0 {
		t.Fatalf("open after the dead job's event = %d, want 0", got)
	}
	if _, err := e.st.RetryDead(e.ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if got := e.open("capped"); got != 1 {
		t.Fatalf("open after the retry = %d, want 1", got)
	}
}

func TestTenantCapHoldsUnderConcurrentSubmissions(t *testing.T) {
	t.Parallel()
	const limit, tries = 3, 12
	e := newTenantEnv(t, limit)
	var wg sync.WaitGroup
	var mu sync.Mutex
	took, refused := 0, 0
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ok, err := e.accept("capped", fmt.Sprintf("j%d", i))
				if errors.Is(err, store.ErrContention) {
					continue
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && ok:
					took++
				case errors.Is(err, store.ErrOverQuota):
					refused++
				default:
					t.Errorf("Accept(j%d) = %v, %v", i, ok, err)
				}
				return
			}
		}()
	}
	wg.Wait()
	if took != limit || refused != tries-limit || e.open("capped") != limit {
		t.Fatalf("took %d, refused %d, open %d; want %d, %d, %d", took, refused, e.open("capped"), limit, tries-limit, limit)
	}
}

// TestCreateJobNeverAnswersAnotherTenantsJob: a create that meets an id
// already held answers that job only to its own tenant; another tenant's
// create is refused and reads nothing of it, through both create paths
// (with and without a tenant cap).
func TestCreateJobNeverAnswersAnotherTenantsJob(t *testing.T) {
	t.Parallel()
	e := newTenantEnv(t, 5)
	for _, owner := range []string{"acme", "capped"} {
		id := "shared-" + owner
		first, created, err := e.st.CreateJob(e.ctx, job.Spec{ID: id, TenantID: owner, WorkflowID: "wf-a", Input: json.RawMessage(`{"secret":1}`)})
		if err != nil || !created {
			t.Fatalf("CreateJob(%s) = %v, %v", id, created, err)
		}
		again, created, err := e.st.CreateJob(e.ctx, job.Spec{ID: id, TenantID: owner, WorkflowID: "wf-a", Input: json.RawMessage(`{}`)})
		if err != nil || created || again.ID != first.ID || string(again.Input) != `{"secret":1}` {
			t.Fatalf("repeat by the same tenant = %+v, %v, %v; want the first job", again, created, err)
		}
		for _, other := range []string{"globex", "capped", "acme"} {
			if other == owner {
				continue
			}
			got, created, err := e.st.CreateJob(e.ctx, job.Spec{ID: id, TenantID: other, WorkflowID: "wf-a", Input: json.RawMessage(`{}`)})
			if !errors.Is(err, store.ErrConflict) || created || got.ID != "" || got.Input != nil {
				t.Fatalf("%s's create of %s's id = %+v, %v, %v; want ErrConflict and no job", other, owner, got, created, err)
			}
		}
		if j := e.job(id); j.TenantID != owner {
			t.Fatalf("the job's tenant became %s", j.TenantID)
		}
	}
}
