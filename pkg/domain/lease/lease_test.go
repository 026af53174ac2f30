package lease_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/lease"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// jobs makes candidates from a spec of space-separated jobs, each
// <tenant><priority>[<flags>], created in spec order: "a5 b5p c0w" is a job
// of tenant a at priority 5, one of b at 5 pinned to On-Demand (p), one of
// c at 0 of workflow wf-other (w). Job ids are <tenant><index>.
func jobs(spec string) []lease.Candidate {
	var out []lease.Candidate
	for i, f := range strings.Fields(spec) {
		c := lease.Candidate{JobID: fmt.Sprintf("%c%d", f[0], i), TenantID: f[:1], WorkflowID: "wf-a", Created: t0.Add(time.Duration(i) * time.Second)}
		rest := f[1:]
		if strings.HasSuffix(rest, "p") {
			c.OnDemandOnly, rest = true, strings.TrimSuffix(rest, "p")
		}
		if strings.HasSuffix(rest, "w") {
			c.WorkflowID, rest = "wf-other", strings.TrimSuffix(rest, "w")
		}
		fmt.Sscan(rest, &c.Priority)
		out = append(out, c)
	}
	return out
}

func ids(cs []lease.Candidate) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.JobID)
	}
	return strings.Join(s, " ")
}

var (
	spot     = lease.Worker{Workflows: []string{"wf-a"}}
	onDemand = lease.Worker{Workflows: []string{"wf-a"}, OnDemand: true}
	noFair   = lease.Tenants{}
)

func tenants(leased map[string]int, settings ...fleetconfig.Tenant) lease.Tenants {
	return lease.Tenants{FairShare: true, Leased: leased, Settings: func(id string) fleetconfig.Tenant {
		for _, s := range settings {
			if s.ID == id {
				return s
			}
		}
		return fleetconfig.Tenant{ID: id}
	}}
}

func TestOrder(t *testing.T) {
	cases := []struct {
		name    string
		spec    string
		worker  lease.Worker
		tenants lease.Tenants
		want    string
	}{
		{"the queue's order: highest priority first, then oldest", "a5 a5 a0 a0", spot, noFair, "a0 a1 a2 a3"},
		{"workflows the worker does not serve are dropped", "a5 a5w a0", spot, noFair, "a0 a2"},
		{"a Spot worker never tries a job pinned to On-Demand", "a5 a5p a0p a0", spot, noFair, "a0 a3"},
		{"an On-Demand worker tries pinned jobs first within their priority", "a5 a5p a0 a0p", onDemand, noFair, "a1 a0 a3 a2"},
		{"pinning never jumps a priority", "a0p a5", onDemand, noFair, "a1 a0"},
		{"a full worker tries nothing", "a5 a0", lease.Worker{Workflows: []string{"wf-a"}, Full: true}, noFair, ""},
		{"fair share: equal weights alternate, oldest tenant first", "a0 a0 a0 a0 a0 a0 b0 b0", spot, tenants(nil), "a0 b6 a1 b7 a2 a3 a4 a5"},
		{"fair share: leases held elsewhere count", "a0 a0 a0 a0 b0 b0 b0 b0", spot, tenants(map[string]int{"a": 2}), "b4 b5 a0 b6 a1 b7 a2 a3"},
		{"fair share: weight 2 takes two of every three", "h0 h0 h0 h0 h0 h0 b0 b0 b0", spot, tenants(nil, fleetconfig.Tenant{ID: "h", Weight: 2}), "h0 b6 h1 h2 b7 h3 h4 b8 h5"},
		{"fair share: a tenant at max_leased goes last", "c0 c0 c0 c0 a0 a0", spot, tenants(nil, fleetconfig.Tenant{ID: "c", MaxLeased: 1}), "c0 a4 a5 c1 c2 c3"},
		{"fair share orders the top priority only", "b5 a5 a5 b0 a0", spot, tenants(map[string]int{"b": 3}), "a1 a2 b0 b3 a4"},
		{"fair share with one tenant at the top keeps the order", "a5 a5 b0", spot, tenants(map[string]int{"a": 9}), "a0 a1 b2"},
		{"fair share merges what the worker may lease", "b5p a5 a5 b5", spot, tenants(nil), "a1 b3 a2"},
	}
	for _, c := range cases {
		got := ids(lease.Order(jobs(c.spec), c.worker, c.tenants, 1, nil))
		if got != c.want {
			t.Errorf("%s: order %q, want %q", c.name, got, c.want)
		}
	}
}

func TestOrderSpreadsOnlyTheHeadOfTheTopPriority(t *testing.T) {
	cands := jobs("a5 a5 a5 a5 a5 a5 a0 a0 a0 a0")
	rng := rand.New(rand.NewPCG(1, 2))
	moved := false
	for range 200 {
		got := lease.Order(cands, spot, noFair, 4, rng.Shuffle)
		if len(got) != len(cands) {
			t.Fatalf("%d candidates in, %d out", len(cands), len(got))
		}
		seen := map[string]bool{}
		for i, c := range got {
			seen[c.JobID] = true
			if i >= 4 && c.JobID != cands[i].JobID {
				t.Fatalf("position %d outside the spread moved: %s", i, c.JobID)
			}
			if i < 4 && c.Priority != 5 {
				t.Fatalf("a lower-priority job %s entered the spread", c.JobID)
			}
		}
		if len(seen) != len(cands) {
			t.Fatal("candidates lost or duplicated")
		}
		moved = moved || got[0].JobID != "a0"
	}
	if !moved {
		t.Fatal("the head was never shuffled")
	}
	if got := ids(lease.Order(jobs("a5 a5 a0"), spot, noFair, 8, rng.Shuffle)); !strings.HasSuffix(got, "a2") {
		t.Fatalf("a spread wider than the top priority moved a lower priority: %s", got)
	}
}

func TestWhatAPollMustReadBeforeOrdering(t *testing.T) {
	if lease.Pinned(jobs("a5 a0")) || !lease.Pinned(jobs("a5 a0p")) {
		t.Error("Pinned: the purchase option matters only with a pinned candidate")
	}
	fair := tenants(nil)
	for _, c := range []struct {
		spec string
		want bool
	}{{"a5 a5 b0", false}, {"a5 b5", true}, {"", false}} {
		if got := lease.NeedsCensus(jobs(c.spec), fair); got != c.want {
			t.Errorf("NeedsCensus(%q) = %v, want %v", c.spec, got, c.want)
		}
	}
	if lease.NeedsCensus(jobs("a5 b5"), noFair) {
		t.Error("NeedsCensus without fair share")
	}
	if tenant, prio, ok := lease.OneTenantAtTop(jobs("a5 a5")); !ok || tenant != "a" || prio != 5 {
		t.Errorf("OneTenantAtTop(a5 a5) = %q %d %v", tenant, prio, ok)
	}
	for _, spec := range []string{"a5 a0", "a5 b5", ""} {
		if _, _, ok := lease.OneTenantAtTop(jobs(spec)); ok {
			t.Errorf("OneTenantAtTop(%q) = true", spec)
		}
	}
}
