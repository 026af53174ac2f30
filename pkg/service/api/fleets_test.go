package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/events"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

// A scheduled tick delivered as EventBridge would scales the local fleet
// for queued work, and GET /api/admin/fleets shows the decision and, with
// ?history=true, the history.
func TestScheduledTickDecisionShowsInAdminFleets(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *devstack.Options) { o.Fleet.Tick = -1 })
	for range 3 {
		h.submit(map[string]any{"tenant_id": "t", "workflow_id": "wf-a"})
	}
	h.waitFor(h.submissionQueueEmpty, "dispatch")
	var tick map[string]any
	if err := json.Unmarshal(mustRead(t, "schedule-tick.json"), &tick); err != nil {
		t.Fatal(err)
	}
	r := h.do("POST", "/local/events", "op", tick)
	h.want(r, 200, "")
	if !strings.Contains(string(r.raw), `"fleet_slug":"gpu"`) {
		t.Fatalf("tick summary %s", r.raw)
	}
	fl := h.do("GET", "/api/admin/fleets?history=true", "op", nil)
	h.want(fl, 200, "")
	gpu := fl.body["fleets"].([]any)[0].(map[string]any)
	last := gpu["last_decision"].(map[string]any)
	// Three jobs need three single-slot instances (dispatch's wake may have
	// asked for some of them already).
	if gpu["desired"].(float64) != 3 || last["desired"].(float64) != 3 || !strings.Contains(last["reason"].(string), "3 ready + 0 leased need 3") ||
		last["reason_code"] != "grow" && last["reason_code"] != "hold" {
		t.Fatalf("gpu fleet after the tick: %v", gpu)
	}
	// Newest first: the tick's decision, then the wake's that left zero.
	hist, ok := gpu["history"].([]any)
	if !ok || len(hist) != 2 || hist[0].(map[string]any)["reason"] != last["reason"] ||
		!strings.HasPrefix(hist[1].(map[string]any)["reason"].(string), "woken by ") {
		t.Fatalf("history = %v", gpu["history"])
	}
	if g, _ := h.stack.Fleet.Describe(t.Context(), "gpu"); g.Desired != 3 {
		t.Fatalf("local fleet desired %d", g.Desired)
	}
	h.want(h.do("GET", "/api/admin/fleets?history=maybe", "op", nil), 400, "invalid_argument")
}

// Dispatch's wake on enqueue is a decision too: before any tick, the admin
// fleets answer says why a fleet is booting.
func TestWakeOnEnqueueShowsInAdminFleets(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.submit(map[string]any{"tenant_id": "t", "workflow_id": "wf-a"})
	h.waitFor(h.submissionQueueEmpty, "dispatch")
	fl := h.do("GET", "/api/admin/fleets?history=true", "op", nil)
	h.want(fl, 200, "")
	gpu := fl.body["fleets"].([]any)[0].(map[string]any)
	last, ok := gpu["last_decision"].(map[string]any)
	if !ok || last["reason"] != "woken by 1 ready job" || last["reason_code"] != "wake" || last["desired"].(float64) != 1 || gpu["desired"].(float64) != 1 {
		t.Fatalf("gpu fleet after a wake: %v", gpu)
	}
	if in, _ := last["inputs"].(map[string]any); in["ready"] != 1.0 || in["desired_after"] != 1.0 {
		t.Fatalf("wake inputs %v", last["inputs"])
	}
	if hist, ok := gpu["history"].([]any); !ok || len(hist) != 1 || hist[0].(map[string]any)["reason"] != last["reason"] {
		t.Fatalf("history = %v", gpu["history"])
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := events.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every EventBridge sample in events/ is routed by POST /local/events to the
// handler its AWS rule routes it to, and answers that handler's summary.
func TestEverySampleEventIsRoutedLocally(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *devstack.Options) { o.Fleet.Tick = -1 })
	entries, err := events.FS.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	routed := 0
	for _, e := range entries {
		var ev map[string]any
		if err := json.Unmarshal(mustRead(t, e.Name()), &ev); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if _, ok := ev["detail-type"]; !ok {
			continue // not an EventBridge event (API Gateway, SQS)
		}
		r := h.do("POST", "/local/events", "op", ev)
		h.want(r, 200, "")
		routed++
	}
	// The schedule, Spot, rebalance, three state changes, the terminate
	// action and its test notification, Capacity Reservation and Health.
	if routed != 10 {
		t.Fatalf("routed %d samples, want the 10 EventBridge samples of events/", routed)
	}
}
