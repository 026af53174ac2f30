package api_test

import (
	"math"
	"strings"
	"testing"
	"time"
)

// A registration reports its instance's boot; a bad one is refused and
// registers nothing; GET /api/admin/fleets shows the fleet's phases up to
// the first lease and the slowest.
func TestBootPhasesAtRegistrationShowInAdminFleets(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	now := time.Now().UTC()
	at := func(ago time.Duration) string { return now.Add(-ago).Format(time.RFC3339Nano) }
	reg := func(boot map[string]any) map[string]any {
		return map[string]any{"worker_id": "w1", "fleet_slug": "gpu", "stage": "test", "boot": boot}
	}
	for _, c := range []struct {
		boot map[string]any
		msg  string
	}{
		{map[string]any{"launched_at": "yesterday"}, `"boot.launched_at": "yesterday" is not an RFC 3339 time`},
		{map[string]any{"launched_at": at(time.Minute), "agent_started_at": at(2 * time.Minute)}, `"boot.agent_started_at"`},
		{map[string]any{"runner_ready_at": now.Add(time.Hour).Format(time.RFC3339)}, "is in the future"},
		{map[string]any{"launched": at(time.Minute)}, `unknown field "launched"`},
		{map[string]any{"runner_ready_at": at(time.Minute), "warmed_up_at": at(2 * time.Minute)}, `"boot.warmed_up_at"`},
		{map[string]any{"from_pool": true, "agent_started_at": at(time.Minute)}, `"boot.from_pool": a start from a warm pool needs "boot.launched_at"`},
	} {
		r := h.do("POST", "/api/worker/register", "secret", reg(c.boot))
		h.want(r, 400, "invalid_argument")
		if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, c.msg) {
			t.Errorf("boot %v: message %q does not contain %q", c.boot, msg, c.msg)
		}
	}
	if ws := h.do("GET", "/api/admin/workers?fleet=gpu", "op", nil); len(ws.body["workers"].([]any)) != 0 {
		t.Fatalf("a refused registration registered a worker: %s", ws.raw)
	}

	r := h.do("POST", "/api/worker/register", "secret", reg(map[string]any{
		"launched_at": at(100 * time.Second), "agent_started_at": at(70 * time.Second), "runner_ready_at": at(10 * time.Second)}))
	h.want(r, 201, "")
	token := r.body["token"].(string)
	h.submit(map[string]any{"tenant_id": "t", "workflow_id": "wf-a"})
	h.waitFor(h.submissionQueueEmpty, "dispatch")
	h.want(h.do("POST", "/api/worker/poll", token, map[string]any{}), 200, "")

	fl := h.do("GET", "/api/admin/fleets", "op", nil)
	h.want(fl, 200, "")
	gpu := fl.body["fleets"].([]any)[0].(map[string]any)
	boot, ok := gpu["boot"].(map[string]any)
	if !ok || boot["workers"].(float64) != 1 || boot["slowest"] != "agent_to_runner_ready" {
		t.Fatalf("boot %v: want one worker, the runner's 60 s the slowest phase", gpu["boot"])
	}
	want := []struct {
		name string
		lo   float64
		hi   float64
	}{{"launch_to_agent", 30, 30}, {"agent_to_runner_ready", 60, 60}, {"runner_ready_to_registered", 10, 40}, {"registered_to_first_lease", 0, 30}}
	phases := boot["phases"].([]any)
	if len(phases) != len(want) {
		t.Fatalf("phases %v", phases)
	}
	for i, w := range want {
		p := phases[i].(map[string]any)
		if p["name"] != w.name || p["p50_s"].(float64) < math.Floor(w.lo) || p["p50_s"].(float64) > w.hi+1 {
			t.Errorf("phase %d = %v, want %s of %.0f-%.0f s", i, p, w.name, w.lo, w.hi)
		}
	}
}

// A worker that warmed its runner up reports when the warm-up ended: its
// phases run from the runner's readiness to the warm-up's end and on to
// registration, beside a worker without one; a worker that reported itself
// unhealthy is left out of the timeline.
func TestWarmUpIsABootPhaseOfItsOwn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	now := time.Now().UTC()
	at := func(ago time.Duration) string { return now.Add(-ago).Format(time.RFC3339Nano) }
	register := func(id string, boot map[string]any) string {
		r := h.do("POST", "/api/worker/register", "secret", map[string]any{"worker_id": id, "fleet_slug": "gpu", "stage": "test", "boot": boot})
		h.want(r, 201, "")
		return r.body["token"].(string)
	}
	register("cold", map[string]any{"launched_at": at(80 * time.Second), "from_pool": true, "agent_started_at": at(50 * time.Second), "runner_ready_at": at(40 * time.Second)})
	register("warm", map[string]any{"agent_started_at": at(300 * time.Second), "runner_ready_at": at(290 * time.Second), "warmed_up_at": at(20 * time.Second)})
	sick := register("sick", map[string]any{"agent_started_at": at(900 * time.Second), "runner_ready_at": at(890 * time.Second)})
	h.want(h.do("POST", "/api/worker/unhealthy", sick, map[string]any{"reason": "warm-up failed"}), 200, "")

	fl := h.do("GET", "/api/admin/fleets", "op", nil)
	h.want(fl, 200, "")
	boot := fl.body["fleets"].([]any)[0].(map[string]any)["boot"].(map[string]any)
	got := map[string]map[string]any{}
	var names []string
	for _, p := range boot["phases"].([]any) {
		m := p.(map[string]any)
		got[m["name"].(string)] = m
		names = append(names, m["name"].(string))
	}
	wantNames := []string{"pool_start_to_agent", "agent_to_runner_ready", "runner_ready_to_warmed_up", "runner_ready_to_registered", "warmed_up_to_registered"}
	if strings.Join(names, " ") != strings.Join(wantNames, " ") {
		t.Fatalf("phases %v, want %v", names, wantNames)
	}
	if w := got["agent_to_runner_ready"]; w["workers"].(float64) != 2 || w["max_s"].(float64) != 10 {
		t.Errorf("the sick worker's 10 s boot is not left out, or a worker is missing: %v", w)
	}
	if w := got["runner_ready_to_warmed_up"]; w["workers"].(float64) != 1 || w["p50_s"].(float64) != 270 {
		t.Errorf("warm-up phase %v, want 270 s on one worker", w)
	}
	if boot["slowest"] != "runner_ready_to_warmed_up" || boot["workers"].(float64) != 2 {
		t.Errorf("boot %v: want the warm-up the slowest, over the two healthy workers", boot)
	}
}
