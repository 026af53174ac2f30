package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/service/webhook"
)

func TestCallbackURLOverHTTP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	// The dev stack's deliveries may reach loopback; the test drains the
	// relay itself. The receiver's port is named: an entry without one
	// allows 443 only.
	port := rcv.URL[strings.LastIndex(rcv.URL, ":")+1:]
	h := newHarness(t, func(o *devstack.Options) {
		o.Config.Webhooks.AllowedHosts = []string{"127.0.0.1:" + port, "*.example.net"}
		o.RelayInterval = -1
	})

	for _, u := range []string{"https://hooks.example.org/x", "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/hook",
		"http://127.0.0.1:22/", "https://127.0.0.1/", "https://hooks.example.net:8443/", "https://10.0.0.1.example.net:22/"} {
		r := h.do("POST", "/api/jobs", "op", map[string]any{"job_id": "refused", "tenant_id": "t", "workflow_id": "wf-a", "callback_url": u})
		h.want(r, 400, "invalid_argument")
		if msg, _ := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "webhooks.allowed_hosts") {
			t.Fatalf("%s refused with %q", u, msg)
		}
	}
	if !h.submissionQueueEmpty() {
		t.Fatal("a refused submission was queued")
	}
	h.want(h.do("GET", "/api/jobs/refused", "op", nil), 404, "not_found")

	id := h.submit(map[string]any{"tenant_id": "t", "workflow_id": "wf-a", "callback_url": rcv.URL + "/done?token=receiver-own"})
	cb := h.job(id)["callback"].(map[string]any)
	if cb["url"] != rcv.URL+"/done" || cb["state"] != "waiting" || cb["attempts"].(float64) != 0 {
		t.Fatalf("callback before any outcome = %v", cb)
	}
	token := h.register("w1", "gpu")
	l, _ := h.poll(token)
	h.want(h.do("POST", "/api/worker/complete", token, map[string]any{"job_id": id, "lease_token": l.token, "result": map[string]any{"frames": 7}}), 200, "")
	if _, err := h.stack.Relay.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 1 {
		mu.Unlock()
		t.Fatalf("the receiver got %d deliveries, want 1", len(got))
	}
	r, body := got[0], bodies[0]
	mu.Unlock()
	// The receiver holds the stack's webhook key, no other.
	receiver, err := signing.NewStatic(h.stack.WebhookKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.Verify(signing.Ring(receiver), r.Header, body, time.Now(), 5*time.Minute); err != nil {
		t.Fatalf("the receiver cannot verify the delivery: %v", err)
	}
	for _, other := range []string{fleetSecret, h.stack.ConsoleKey} {
		wrong, _ := signing.NewStatic(other)
		if err := webhook.Verify(signing.Ring(wrong), r.Header, body, time.Now(), 5*time.Minute); err == nil {
			t.Fatal("the delivery verifies under another key of the stack")
		}
	}
	var d webhook.Delivery
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	if d.Detail.JobID != id || d.Detail.Status != "succeeded" || string(d.Detail.Result) != `{"frames":7}` || r.URL.Query().Get("token") != "receiver-own" {
		t.Fatalf("delivery %s to %s", body, r.URL)
	}
	cb = h.job(id)["callback"].(map[string]any)
	if cb["state"] != "delivered" || cb["attempts"].(float64) != 1 || cb["delivered_at"] == nil || cb["event_id"] != d.ID {
		t.Fatalf("callback after delivery = %v", cb)
	}
}
