package api_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

// A process keeps a fleet's estimates a few seconds (api.EstimateTTL), so
// each test sets its fleet up through the store and the worker routes and
// reads estimates only once it is set up: a GET before would answer from
// the projection it cached then.

// file submits a job and waits, through the store, until dispatch filed it.
func (h *harness) file(id, tenant, workflow string) string {
	h.t.Helper()
	r := h.do("POST", "/api/jobs", "op", map[string]any{"job_id": id, "tenant_id": tenant, "workflow_id": workflow})
	h.want(r, 202, "")
	full := r.body["job_id"].(string)
	h.waitFor(func() bool {
		j, err := h.stack.Store.GetJob(h.t.Context(), full)
		return err == nil && j.Status != job.Accepted
	}, "job "+full+" to be dispatched")
	return full
}

// estimate is a job as GET /api/jobs/{job_id} answers it to auth, with its
// estimate's fields.
type estimate struct {
	status, start, basis string
	position             int
	code, text           string
	params               map[string]string
}

func (h *harness) estimate(id, auth string) estimate {
	h.t.Helper()
	r := h.do("GET", "/api/jobs/"+id, auth, nil)
	h.want(r, 200, "")
	var e estimate
	e.status, _ = r.body["status"].(string)
	e.start, _ = r.body["estimated_start_at"].(string)
	e.basis, _ = r.body["estimate_basis"].(string)
	p, _ := r.body["position"].(float64)
	e.position = int(p)
	if w, ok := r.body["waiting_on"].(map[string]any); ok {
		e.code, _ = w["code"].(string)
		e.text, _ = w["text"].(string)
		e.params = map[string]string{}
		ps, _ := w["params"].(map[string]any)
		for k, v := range ps {
			e.params[k] = v.(string)
		}
	}
	return e
}

// finish leases one job with the worker token and completes it after
// run on the clock, for the fleet's run-time history.
func (h *harness) finish(token string, clk *clock.Fake, run time.Duration) {
	h.t.Helper()
	l, r := h.poll(token)
	h.want(r, 200, "")
	clk.Advance(run)
	h.want(h.do("POST", "/api/worker/complete", token, map[string]any{"job_id": l.id, "lease_token": l.token, "result": map[string]any{}}), 200, "")
}

// fakeClock runs the harness's stack on a fake clock.
func fakeClock(clk *clock.Fake) func(*devstack.Options) {
	return func(o *devstack.Options) { o.Clock = clk }
}

// Two jobs behind two running ones, with a run-time history of 30 s and
// none of boots: each waits for a running job to end, in line, and is
// expected then (the instances the next tick launches have no boot time to
// be expected by).
func TestAJobBehindOthersWaitsOnTheJobsAhead(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, fakeClock(clk), func(o *devstack.Options) { o.Config.Fleets[0].MaxInstances = 10 })
	w := h.register("w1", "gpu")
	h.file("first", "acme", "wf-a")
	h.finish(w, clk, 30*time.Second)
	for i := range 4 {
		h.file(fmt.Sprint("j", i), "acme", "wf-a")
	}
	h.poll(w)
	h.poll(w)
	var queued []estimate
	for i := range 4 {
		if e := h.estimate(fmt.Sprint("acme:j", i), "op"); e.status == "queued" {
			queued = append(queued, e)
		}
	}
	if len(queued) != 2 {
		t.Fatalf("%d queued, want 2", len(queued))
	}
	for _, e := range queued {
		if e.code != "jobs_ahead" || e.basis != "projection" || e.start != "2026-03-01T12:01:00.000Z" || !sameInstant(e.params["ready_at"], e.start) {
			t.Errorf("estimate %+v, want jobs_ahead with a start and when the slot frees", e)
		}
		if ahead, _ := strconv.Atoi(e.params["ahead"]); e.position < 1 || ahead != e.position-1 {
			t.Errorf("position %d, %s ahead", e.position, e.params["ahead"])
		}
	}
	if queued[0].position == queued[1].position {
		t.Errorf("both in place %d", queued[0].position)
	}
}

func TestAJobOfATenantAtItsCapWaitsOnTheCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *devstack.Options) {
		o.Config.Tenants = append(o.Config.Tenants, fleetconfig.Tenant{ID: "capped", MaxLeased: 1})
	})
	w := h.register("w1", "gpu")
	h.file("a", "capped", "wf-a")
	h.file("b", "capped", "wf-a")
	l, _ := h.poll(w)
	other := "capped:a"
	if l.id == other {
		other = "capped:b"
	}
	e := h.estimate(other, "op")
	if e.code != "tenant_at_cap" || e.params["tenant"] != "capped" || e.params["max_leased"] != "1" || e.params["leased"] != "1" {
		t.Errorf("estimate %+v, want tenant_at_cap of capped, 1 of 1", e)
	}
}

func TestAJobInBackoffWaitsOutTheBackoff(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := h.register("w1", "gpu")
	id := h.file("flaky", "acme", "wf-a")
	l, _ := h.poll(w)
	h.want(h.do("POST", "/api/worker/fail", w, map[string]any{"job_id": l.id, "lease_token": l.token, "error": map[string]any{"message": "oom", "retryable": true}}), 200, "")
	j := h.job(id)
	e := h.estimate(id, "op")
	if e.code != "backoff" || j["not_before"] == nil || !sameInstant(e.params["until"], j["not_before"].(string)) {
		t.Errorf("estimate %+v, want backoff until the job's not_before %v", e, j["not_before"])
	}
}

// Three instances, the fleet's max, each running a job of a workflow with
// no history: a queued job waits on the fleet's max, and when a slot frees
// cannot be said.
func TestAJobOfAFleetAtItsMaxWaitsOnTheMax(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var tokens []string
	for i := range 3 {
		tokens = append(tokens, h.register(fmt.Sprint("w", i), "gpu"))
	}
	for i := range 7 {
		h.file(fmt.Sprint("j", i), "acme", "wf-b")
	}
	for _, tok := range tokens {
		h.poll(tok)
		h.poll(tok)
	}
	for i := range 7 {
		e := h.estimate(fmt.Sprint("acme:j", i), "op")
		if e.status != "queued" {
			continue
		}
		if e.code != "fleet_at_max" || e.params["max"] != "3" || e.basis != "at_max_unknown_run_times" || e.start != "" {
			t.Errorf("estimate %+v, want fleet_at_max 3 with no start (no run-time history)", e)
		}
		return
	}
	t.Fatal("no job left queued")
}

// An empty fleet woken by a job: once the scaler's tick has seen the
// instance the wake launched, the job waits on it booting.
func TestAJobOfAWokenFleetWaitsOnTheBootingInstance(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.file("j", "acme", "wf-a")
	if _, err := h.stack.Scaler.Tick(h.t.Context()); err != nil {
		t.Fatal(err)
	}
	e := h.estimate(id, "op")
	if e.code != "capacity_booting" || e.params["instances"] != "1" || e.position != 1 || e.basis != "no_history" {
		t.Errorf("estimate %+v, want capacity_booting, 1 instance, no boot history", e)
	}
}

// The estimate is the job's tenant's only: another tenant's key finds no
// job, a worker's token and nobody are refused; the listing shows the
// tenant's queued job's expected start.
func TestAnEstimateIsTheTenantsOwn(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, fakeClock(clk))
	acme, globex := h.newKey("acme"), h.newKey("globex")
	w := h.register("w1", "gpu")
	h.file("first", "acme", "wf-a")
	h.finish(w, clk, 30*time.Second)
	h.file("busy", "acme", "wf-a")
	h.poll(w)
	h.file("busy2", "acme", "wf-a")
	h.poll(w)
	id := h.file("mine", "acme", "wf-a")

	e := h.estimate(id, acme)
	if e.status != "queued" || e.start == "" || e.code == "" || e.position != 1 {
		t.Fatalf("acme's own job: %+v", e)
	}
	h.want(h.do("GET", "/api/jobs/"+id, globex, nil), 404, "not_found")
	h.want(h.do("GET", "/api/jobs/"+id, w, nil), 401, "unauthenticated")
	h.want(h.do("GET", "/api/jobs/"+id, "", nil), 401, "unauthenticated")

	r := h.do("GET", "/api/jobs?status=queued", acme, nil)
	h.want(r, 200, "")
	listed := r.body["jobs"].([]any)
	if len(listed) != 1 || listed[0].(map[string]any)["estimated_start_at"] != e.start {
		t.Errorf("listing %v, want the one queued job with its estimate %s", listed, e.start)
	}
	r = h.do("GET", "/api/jobs?status=queued", globex, nil)
	h.want(r, 200, "")
	if n := len(r.body["jobs"].([]any)); n != 0 {
		t.Errorf("globex lists %d of acme's jobs", n)
	}
}

// sameInstant reports whether two RFC 3339 times are the same instant
// (the estimate's params are to the second).
func sameInstant(a, b string) bool {
	ta, err1 := time.Parse(time.RFC3339, a)
	tb, err2 := time.Parse(time.RFC3339, b)
	return err1 == nil && err2 == nil && ta.Truncate(time.Second).Equal(tb.Truncate(time.Second))
}

// A fleet whose last tick found Spot short for a minute, with an
// On-Demand rung after 5: a queued job waits on Spot, and on the rung.
func TestAJobWaitsOnSpotAndTheOnDemandRung(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, fakeClock(clk), func(o *devstack.Options) {
		o.Config.Fleets[0].OnDemand.FallbackAfter = fleetconfig.Duration(5 * time.Minute)
	})
	id := h.file("j", "acme", "wf-a")
	st := h.stack.Store
	prev, err := st.GetFleetState(t.Context(), "gpu")
	if err != nil {
		t.Fatal(err)
	}
	tick := clk.Now()
	if err := st.RecordDecision(t.Context(), "gpu", fleetstate.Record{Decision: fleetstate.Decision{At: tick, Desired: 1,
		Reason: scaling.RecordedReason(scaling.ReasonHold, "hold 1"),
		Inputs: fleetstate.Inputs{Ladder: &fleetstate.LadderInputs{SpotShortSeconds: 60, SpotDesired: 1}}}}, prev); err != nil {
		t.Fatal(err)
	}
	e := h.estimate(id, "op")
	if e.code != "spot_unavailable" || e.params["next_rung"] != "on-demand" || !sameInstant(e.params["since"], tick.Add(-time.Minute).Format(time.RFC3339)) ||
		!sameInstant(e.params["rung_at"], tick.Add(4*time.Minute).Format(time.RFC3339)) {
		t.Errorf("estimate %+v, want spot_unavailable since a minute ago, the On-Demand rung in 4", e)
	}
}
