package api_test

import (
	"context"
	"testing"

	"github.com/fleetq/fleetq/pkg/aws/auth"
)

// A worker token replaced in another API process (which this one's memory
// of checked tokens knows nothing of) is refused at its very next write,
// the heartbeat included: the lease is not extended, its progress not
// set, and no presigned URL is handed out. The new token heartbeats on.
func TestHeartbeatWithATokenRotatedElsewhereIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	old := h.register("w1", "gpu")
	id := h.submit(map[string]any{"tenant_id": "t", "workflow_id": "wf-a"})
	l, r := h.poll(old)
	if r.status != 200 || l.id != id {
		t.Fatalf("poll = %d %s", r.status, r.raw)
	}
	// This process now remembers the old token as checked.
	hb := h.do("POST", "/api/worker/heartbeat", old, map[string]any{"job_id": id, "lease_token": l.token, "progress": 0.1})
	h.want(hb, 200, "")
	before := h.job(id)

	// Another process rotates the token: it writes the worker item only.
	fresh, parsed := auth.NewWorkerToken("gpu", "w1")
	if _, err := h.stack.Store.RotateWorkerToken(context.Background(), "w1", parsed.Hash); err != nil {
		t.Fatal(err)
	}

	for _, body := range []map[string]any{
		{"job_id": id, "lease_token": l.token, "progress": 0.9},
		{"job_id": id, "lease_token": l.token, "refresh_urls": true},
	} {
		r := h.do("POST", "/api/worker/heartbeat", old, body)
		h.want(r, 401, "unauthenticated")
		if _, ok := r.body["lease_urls"]; ok {
			t.Fatalf("a rotated token got presigned URLs: %s", r.raw)
		}
	}
	after := h.job(id)
	if after["progress"] != before["progress"] || after["lease_expires_at"] != before["lease_expires_at"] {
		t.Fatalf("a heartbeat with a rotated token changed the job: progress %v → %v, lease %v → %v",
			before["progress"], after["progress"], before["lease_expires_at"], after["lease_expires_at"])
	}

	// The worker's new token keeps the lease alive.
	h.want(h.do("POST", "/api/worker/heartbeat", fresh, map[string]any{"job_id": id, "lease_token": l.token, "progress": 0.5}), 200, "")
	if p := h.job(id)["progress"]; p != 0.5 {
		t.Fatalf("progress after the new token's heartbeat = %v", p)
	}
	h.want(h.do("POST", "/api/worker/heartbeat", fresh, map[string]any{"job_id": id, "lease_token": l.token, "progress": 0.6}), 200, "")
	h.want(h.do("POST", "/api/worker/complete", fresh, map[string]any{"job_id": id, "lease_token": l.token, "result": map[string]any{"ok": true}}), 200, "")
}
