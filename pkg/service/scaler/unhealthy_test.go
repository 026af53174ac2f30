package scaler_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// lastUnhealthyWorkers reads UnhealthyWorkers from the last tick's EMF line.
func (h *harness) lastUnhealthyWorkers() any {
	h.t.Helper()
	lines := strings.Split(strings.TrimSpace(h.metrics.String()), "\n")
	var doc map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &doc); err != nil {
		h.t.Fatal(err)
	}
	return doc["UnhealthyWorkers"]
}

// A worker that reports its machine unhealthy (a sick GPU) gives its job
// back and takes no work; the next tick terminates its instance as a
// drained one and launches a replacement for the queued job.
func TestUnhealthyWorkersInstanceIsReplaced(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.submit(1, "a")
	h.tick() // launches
	h.advance(5 * time.Minute)
	h.tick()
	leases := h.leaseAll()
	if len(leases) != 1 {
		t.Fatalf("%d leases", len(leases))
	}
	var sick string
	for _, l := range leases {
		h.mu.Lock()
		for inst, a := range h.workers {
			if a == l.a {
				sick = inst
			}
		}
		h.mu.Unlock()
		if _, err := h.sys.Store.MarkWorkerUnhealthy(h.ctx, l.a); err != nil {
			t.Fatal(err)
		}
	}
	if again := h.leaseAll(); len(again) != 0 {
		t.Fatalf("an unhealthy worker leased %v", again)
	}
	if n := h.lastUnhealthyWorkers(); n != float64(0) {
		t.Fatalf("UnhealthyWorkers before any worker was sick: %v", n)
	}
	r := h.tick()
	if len(r.Terminated) != 1 || r.Terminated[0] != sick || r.Desired != 1 {
		t.Fatalf("terminated %v (sick %s) desired %d (%s)", r.Terminated, sick, r.Desired, r.Decision.Reason)
	}
	if n := h.lastUnhealthyWorkers(); n != float64(1) {
		t.Fatalf("UnhealthyWorkers on the tick that replaced the sick worker: %v", n)
	}
	h.advance(5 * time.Minute)
	h.tick()
	if n := h.lastUnhealthyWorkers(); n != float64(0) {
		t.Fatalf("UnhealthyWorkers once its instance is gone: %v", n)
	}
	if s := h.fleet.Stats(); s.Launched != 2 || s.Terminated != 1 {
		t.Fatalf("fleet stats %+v", s)
	}
	if again := h.leaseAll(); len(again) != 1 {
		t.Fatalf("the replacement leased %d jobs", len(again))
	}
}
