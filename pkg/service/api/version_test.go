package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/fleetq/fleetq/pkg/lib/version"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

// lockedBuffer is a log destination written by the stack's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An agent of another build is accepted: the API logs a warning naming both
// versions, and the worker listing shows the agent's version and the
// mismatch.
func TestAgentVersionMismatchIsAcceptedAndShown(t *testing.T) {
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "v2.0.0"
	var logs lockedBuffer
	h := newHarness(t, func(o *devstack.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	for id, v := range map[string]string{"old": "v1.9.0", "same": "v2.0.0", "none": ""} {
		body := map[string]any{"worker_id": id, "fleet_slug": "gpu", "stage": "test"}
		if v != "" {
			body["agent_version"] = v
		}
		h.want(h.do("POST", "/api/worker/register", "secret", body), 201, "")
	}
	h.want(h.do("POST", "/api/worker/register", "secret", map[string]any{"worker_id": "long", "fleet_slug": "gpu", "stage": "test",
		"agent_version": strings.Repeat("v", 129)}), 400, "invalid_argument")

	got := map[string][2]any{}
	for _, w := range h.do("GET", "/api/admin/workers?fleet=gpu", "op", nil).body["workers"].([]any) {
		wm := w.(map[string]any)
		got[wm["worker_id"].(string)] = [2]any{wm["agent_version"], wm["version_mismatch"]}
	}
	want := map[string][2]any{"old": {"v1.9.0", true}, "same": {"v2.0.0", false}, "none": {"", true}}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("worker %s: agent_version, version_mismatch = %v, want %v", id, got[id], w)
		}
	}
	var warned []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "agent version differs from the API's" {
			if rec["api_version"] != "v2.0.0" {
				t.Errorf("warning without the API's version: %s", line)
			}
			warned = append(warned, rec["worker_id"].(string)+"="+rec["agent_version"].(string))
		}
	}
	if strings.Join(warned, ",") != "old=v1.9.0,none=" && strings.Join(warned, ",") != "none=,old=v1.9.0" {
		t.Errorf("warnings for %v, want old and none", warned)
	}
}
