package lease

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// memSource is a queue in memory that answers each claim as told.
type memSource struct {
	ready    []Candidate
	back     []Candidate
	answer   map[string]Result // a claim's result by job id (default Claimed)
	claims   []string          // job ids in the order claimed
	reads    int
	reclaims int
	idle     int
	terms    map[string]Terms
}

func (m *memSource) Shards(string) int { return 1 }
func (m *memSource) ReadReady(_ context.Context, _ string, limits []int) ([][]Candidate, error) {
	m.reads++
	return [][]Candidate{slices.Clone(m.ready[:min(len(m.ready), limits[0])])}, nil
}
func (m *memSource) ReadOthersAtTop(context.Context, string, int, string, int) ([]Candidate, error) {
	return nil, nil
}
func (m *memSource) ReadCensus(context.Context, string) (map[string]int, error) { return nil, nil }
func (m *memSource) ReadOnDemand(context.Context, string) (bool, error)         { return false, nil }
func (m *memSource) EndQueueExpired(context.Context, Candidate, time.Time) error {
	return nil
}
func (m *memSource) Claim(_ context.Context, a Attempt) (Claim, error) {
	m.claims = append(m.claims, a.JobID)
	if m.terms == nil {
		m.terms = map[string]Terms{}
	}
	m.terms[a.JobID] = a.Terms
	if r, ok := m.answer[a.JobID]; ok {
		return Claim{Result: r}, nil
	}
	return Claim{Result: Claimed, Job: job.Job{ID: a.JobID}}, nil
}
func (m *memSource) Reclaim(context.Context, string, int, time.Time) ([]Candidate, error) {
	m.reclaims++
	back := m.back
	m.back = nil
	return back, nil
}
func (m *memSource) Idle(context.Context) error { m.idle++; return nil }

func cands(tenant string, ids ...string) []Candidate {
	out := make([]Candidate, len(ids))
	for i, id := range ids {
		out[i] = Candidate{JobID: id, TenantID: tenant, WorkflowID: "wf", Created: t0.Add(time.Duration(i) * time.Second)}
	}
	return out
}

func newTestPlanner(tenants func(string) fleetconfig.Tenant) *Planner {
	return NewPlanner(Options{Spread: 1, Now: func() time.Time { return t0 }, Tenants: tenants})
}

var poll = Poll{WorkerID: "w1", Fleet: "gpu", Workflows: []string{"wf"}, LeaseFor: 10 * time.Minute}

func TestALostClaimReadsAgainWithAWiderWindow(t *testing.T) {
	src := &memSource{ready: cands("t", "a", "b", "c"), answer: map[string]Result{"a": Taken}}
	p := newTestPlanner(nil)
	j, ok, err := p.Next(context.Background(), src, poll)
	if err != nil || !ok || j.ID != "b" {
		t.Fatalf("Next = %q, %v, %v; want b after a was taken", j.ID, ok, err)
	}
	if src.reads != 2 || !slices.Equal(src.claims, []string{"a", "b"}) {
		t.Fatalf("reads %d, claims %v; want one claim per read: a, then b after reading again", src.reads, src.claims)
	}
	if p.Stats() != (Stats{Claims: 1, Conflicts: 1}) {
		t.Fatalf("stats %+v; want one claim, one conflict", p.Stats())
	}
	// The taken entry is remembered: the next poll does not try a again.
	src.claims = nil
	if j, _, _ := p.Next(context.Background(), src, poll); j.ID != "b" || slices.Contains(src.claims, "a") {
		t.Fatalf("next poll leased %q after claims %v; want a skipped as taken", j.ID, src.claims)
	}
}

func TestATenantFoundFullIsPassedOverForTheRestOfThePoll(t *testing.T) {
	src := &memSource{ready: append(cands("big", "b1", "b2"), cands("small", "s1")...), answer: map[string]Result{"b1": TenantFull}}
	src.ready[2].Created = t0.Add(time.Hour) // small's job is the youngest
	p := newTestPlanner(func(id string) fleetconfig.Tenant { return fleetconfig.Tenant{ID: id, MaxLeased: 3} })
	j, ok, err := p.Next(context.Background(), src, poll)
	if err != nil || !ok || j.ID != "s1" || !slices.Equal(src.claims, []string{"b1", "s1"}) {
		t.Fatalf("Next = %q, %v, %v after claims %v; want big passed over after b1, s1 leased", j.ID, ok, err, src.claims)
	}
	if src.terms["s1"].Slot != 3 {
		t.Fatalf("claim terms %+v, want a slot of the tenant's max_leased 3", src.terms["s1"])
	}
}

func TestARefusedWorkerStopsThePoll(t *testing.T) {
	src := &memSource{ready: cands("t", "a", "b"), answer: map[string]Result{"a": WorkerRefused}, back: cands("t", "r")}
	p := newTestPlanner(nil)
	if _, ok, err := p.Next(context.Background(), src, poll); ok || err != nil {
		t.Fatalf("Next = %v, %v; want nothing", ok, err)
	}
	if !slices.Equal(src.claims, []string{"a"}) || src.reclaims != 0 || src.idle != 1 {
		t.Fatalf("claims %v, reclaims %d, idle %d; want one claim, no reclaim, the poll noted idle", src.claims, src.reclaims, src.idle)
	}
}

func TestReclaimedJobsArePlannedInQueueOrder(t *testing.T) {
	back := append(cands("t", "low"), Candidate{JobID: "high", TenantID: "t", WorkflowID: "wf", Priority: 5, Created: t0.Add(time.Hour)})
	src := &memSource{back: back}
	j, ok, err := newTestPlanner(nil).Next(context.Background(), src, poll)
	if err != nil || !ok || j.ID != "high" {
		t.Fatalf("Next = %q, %v, %v; want the reclaimed job of the higher priority", j.ID, ok, err)
	}
}

func TestTermsNeverOutliveTheRunTimeout(t *testing.T) {
	c := Candidate{JobID: "j", RunTimeout: time.Minute}
	got := TermsFor(c, t0, 10*time.Minute, 0)
	if !got.Expires.Equal(t0.Add(time.Minute)) || !got.RunDeadline.Equal(t0.Add(time.Minute)) {
		t.Fatalf("terms %+v; want the lease and the run deadline at the run timeout", got)
	}
	if got := TermsFor(Candidate{JobID: "j"}, t0, 10*time.Minute, 0); !got.Expires.Equal(t0.Add(10*time.Minute)) || !got.RunDeadline.IsZero() {
		t.Fatalf("terms %+v; want the lease time and no run deadline", got)
	}
}

func TestAPlanSetsAsideJobsPastTheirQueueDeadline(t *testing.T) {
	cs := cands("t", "late", "fine")
	cs[0].QueueDeadline = t0
	cs[1].QueueDeadline = t0.Add(time.Second)
	p := MakePlan(Inputs{Candidates: cs, Worker: Worker{Workflows: []string{"wf"}}, Spread: 1, Now: t0, LeaseFor: time.Minute})
	if len(p.Expired) != 1 || p.Expired[0].JobID != "late" || len(p.Attempts) != 1 || p.Attempts[0].JobID != "fine" {
		t.Fatalf("plan %+v; want late expired, fine attempted", p)
	}
}

func ExampleResult_String() {
	fmt.Println(Claimed, TenantFull, Result(0))
	// Output: claimed tenant full Result(0)
}

// shardedSource is a ready queue over shards; it records each read's limits.
type shardedSource struct {
	memSource
	shards [][]Candidate
	limits [][]int
}

func (m *shardedSource) Shards(string) int { return len(m.shards) }
func (m *shardedSource) ReadReady(_ context.Context, _ string, limits []int) ([][]Candidate, error) {
	m.limits = append(m.limits, slices.Clone(limits))
	out := make([][]Candidate, len(m.shards))
	for i, sh := range m.shards {
		out[i] = slices.Clone(sh[:min(len(sh), limits[i])])
	}
	return out, nil
}

// Under contention a poll reads its whole window from one shard and only
// the first job of the others; a higher priority in another shard is still
// leased first, and a quiet poll reads every shard's head.
func TestAContendedPollReadsOneShardAndTheOthersHeads(t *testing.T) {
	shard := func(prefix string, prio int) []Candidate {
		out := cands("t", prefix+"1", prefix+"2", prefix+"3")
		for i := range out {
			out[i].Priority = prio
		}
		return out
	}
	src := &shardedSource{shards: [][]Candidate{shard("a", 0), shard("b", 0), shard("c", 7), shard("d", 0)}}
	p := NewPlanner(Options{Limit: 8, Spread: 1, Now: func() time.Time { return t0 }, Pick: func(int) int { return 1 }})
	if j, _, _ := p.Next(context.Background(), src, poll); j.ID != "c1" || !slices.Equal(src.limits[0], []int{2, 2, 2, 2}) {
		t.Fatalf("quiet poll leased %s reading %v; want c1 (priority 7) from every shard's head", j.ID, src.limits[0])
	}
	p.mem.widen(1, p.maxWindow()) // claims were lost: the window is 2
	src.limits = nil
	src.shards[2] = src.shards[2][1:] // c1 leased
	if j, _, _ := p.Next(context.Background(), src, poll); j.ID != "c2" || !slices.Equal(src.limits[0], []int{1, 8, 1, 1}) {
		t.Fatalf("contended poll leased %s reading %v; want c2 (the other shard's higher priority) reading 8 of shard 1 and 1 of the others", j.ID, src.limits[0])
	}
	src.limits = nil
	src.shards[2] = nil
	src.answer = map[string]Result{}
	p.mem.widen(1, p.maxWindow())
	if j, _, _ := p.Next(context.Background(), src, poll); j.ID != "b1" {
		t.Fatalf("contended poll leased %s reading %v; want b1 from its shard", j.ID, src.limits)
	}
	// An empty shard: the others' first jobs are the candidates.
	src.limits = nil
	src.shards[1] = nil
	p.mem.widen(1, p.maxWindow())
	if j, _, _ := p.Next(context.Background(), src, poll); j.ID != "a1" || len(src.limits) != 1 {
		t.Fatalf("leased %s reading %v; want a1, the oldest of the other shards' first jobs", j.ID, src.limits)
	}
	// A shard with nothing this worker may lease: every shard is read.
	src.limits = nil
	src.shards[0] = src.shards[0][1:]
	src.shards[1] = cands("t", "x1", "x2")
	for i := range src.shards[1] {
		src.shards[1][i].WorkflowID = "other"
	}
	p.mem.widen(1, p.maxWindow())
	if j, _, _ := p.Next(context.Background(), src, poll); j.ID != "d1" || len(src.limits) != 2 || src.limits[1][0] != src.limits[1][3] {
		t.Fatalf("leased %s reading %v; want d1 (the oldest) after one shard's read found nothing to lease and every shard was read", j.ID, src.limits)
	}
}
