package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// newFairEnv is a store whose stage lists the given tenants block, reading
// `limit` candidates per poll.
func newFairEnv(t *testing.T, tenants string, limit int) *env {
	t.Helper()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(testConfig+"tenants:\n"+tenants))
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, cfg, func(o *store.Options) { o.CandidateLimit = limit })
}

// queue creates n jobs of a tenant, one millisecond apart.
func (e *env) queue(tenant string, n int) {
	e.t.Helper()
	for i := range n {
		e.clock.Advance(time.Millisecond)
		id := fmt.Sprintf("%s-%d-%03d", tenant, e.clock.Now().UnixMilli(), i)
		if _, _, err := e.st.CreateJob(e.ctx, job.Spec{ID: id, TenantID: tenant, WorkflowID: "wf-a", Input: json.RawMessage(`{}`)}); err != nil {
			e.t.Fatalf("CreateJob(%s): %v", id, err)
		}
	}
}

// leaseTenants leases n jobs and answers their tenants in lease order.
func (e *env) leaseTenants(a store.WorkerAuth, n int) []string {
	e.t.Helper()
	var out []string
	for range n {
		out = append(out, e.lease(a).TenantID)
	}
	return out
}

func TestLeasesAlternateBetweenTenantsOfEqualWeight(t *testing.T) {
	t.Parallel()
	// small's jobs come after big's whole backlog, past the 20 jobs a poll
	// reads: the poll has to look past big's backlog to find them.
	e := newFairEnv(t, "  - id: big\n  - id: small\n", 20)
	e.queue("big", 100)
	e.queue("small", 10)
	a := e.register("w1", "gpu", fleetconfig.MaxSlots)
	got := e.leaseTenants(a, 20)
	for i, tenant := range got {
		want := "big"
		if i%2 == 1 {
			want = "small"
		}
		if tenant != want {
			t.Fatalf("lease %d went to %s, want %s; order %s", i, tenant, want, strings.Join(got, " "))
		}
	}
	// small's backlog is empty now: big takes every slot left.
	for i, tenant := range e.leaseTenants(a, 5) {
		if tenant != "big" {
			t.Fatalf("lease %d after small ran out went to %s", 20+i, tenant)
		}
	}
}

func TestLeasesFollowTenantWeights(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, "  - id: heavy\n    weight: 2\n  - id: light\n", 100)
	e.queue("light", 40)
	e.queue("heavy", 40)
	a := e.register("w1", "gpu", fleetconfig.MaxSlots)
	n := map[string]int{}
	for _, tenant := range e.leaseTenants(a, 30) {
		n[tenant]++
	}
	if n["heavy"] != 20 || n["light"] != 10 {
		t.Fatalf("30 leases: heavy %d, light %d; want 20 and 10 (weights 2:1)", n["heavy"], n["light"])
	}
}

func TestFairShareCountsLeasesHeldElsewhere(t *testing.T) {
	t.Parallel()
	cfg, err := fleetconfig.Parse("test.yaml", []byte(testConfig+"tenants:\n  - id: big\n  - id: small\n"))
	if err != nil {
		t.Fatal(err)
	}
	client, table := testenv.DynamoDB(t)
	clk := clock.NewFake(t0)
	open := func() *store.Store {
		return store.New(client, store.Options{Table: table, Config: cfg, Clock: clk, LeaseSpread: 1, Logger: slog.New(slog.DiscardHandler)})
	}
	e := &env{t: t, ctx: context.Background(), clock: clk, cfg: cfg, st: open()}
	e.queue("big", 10)
	a := e.register("w1", "gpu", fleetconfig.MaxSlots)
	e.leaseTenants(a, 4) // big holds 4 leases
	e.queue("small", 10)
	e.queue("big", 10)
	// Another process (a second store on the same table) learns big's four
	// leases from the table, not from its own claims.
	e.st = open()
	got := strings.Join(e.leaseTenants(a, 6), " ")
	if want := "small small small small big small"; got != want {
		t.Fatalf("leases %s, want %s: small catches up with big's 4 leases first", got, want)
	}
}

func TestATenantAtMaxLeasedYieldsToOthers(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, "  - id: capped\n    max_leased: 2\n  - id: free\n", 100)
	e.queue("capped", 10)
	e.queue("free", 3)
	a := e.register("w1", "gpu", fleetconfig.MaxSlots)
	// capped is older but stops at 2 while free has work; with no other
	// work left, max_leased holds capped's jobs back: no job.
	got := strings.Join(e.leaseTenants(a, 5), " ")
	if want := "capped free capped free free"; got != want {
		t.Fatalf("leases %s, want %s", got, want)
	}
	e.noLease(a, store.ErrNoJob)
}

func TestFairShareSeesEndedLeasesAtTheNextCensus(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, "  - id: big\n  - id: small\n", 100)
	e.queue("big", 10)
	e.queue("small", 10)
	a := e.register("w1", "gpu", fleetconfig.MaxSlots)
	var held []job.Job
	for range 4 {
		held = append(held, e.lease(a)) // big small big small
	}
	for _, j := range held {
		if j.TenantID == "small" {
			if err := e.st.Complete(e.ctx, a, j.ID, j.LeaseToken, json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Past the census's life the poll reads the leases again: small holds
	// none now, big two, so small's jobs come first.
	e.clock.Advance(2 * time.Second)
	if got := strings.Join(e.leaseTenants(a, 3), " "); got != "small small big" {
		t.Fatalf("leases %s after small's two leases ended, want small small big", got)
	}
}

// Retries a poll brings back itself are leased by the fair-share rule like
// any other candidates: big holds two leases and small none, so small's
// retry goes first though big's is older.
func TestReclaimedJobsFollowFairShare(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, "  - id: big\n  - id: small\n", 20)
	e.queue("big", 2)
	holder := e.register("w1", "gpu", 2)
	held := []job.Job{e.lease(holder), e.lease(holder)} // big's two, heartbeated through the test
	e.queue("big", 1)
	e.queue("small", 1)
	failer := e.register("w2", "gpu", 2)
	for range 2 {
		j := e.lease(failer)
		if _, err := e.st.Fail(e.ctx, failer, j.ID, j.LeaseToken, job.Error{Message: "try again", Retryable: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Past both retries' backoff: nothing is ready until a poll brings them
	// back. big's two leases (120 s) heartbeat on.
	e.clock.Advance(time.Minute)
	for _, j := range held {
		if _, err := e.st.Heartbeat(e.ctx, holder, j.ID, j.LeaseToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Minute + time.Second)
	if j := e.lease(e.register("w3", "gpu", 1)); j.TenantID != "small" {
		t.Fatalf("the poll that brought back big's and small's retries leased %s's %s, want small's (big holds 2 leases, small none)", j.TenantID, j.ID)
	}
}
