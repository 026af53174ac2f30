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
