package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sort"
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
// versions, the worker listing shows the agent's version, the mismatch and
// whether the agent is of an older release, and the fleet listing counts
// the workers on an older agent.
//
// It sets the process's version, which every other test's API reads, so it
// does not run in parallel: go test runs it before the parallel tests start.
func TestAgentVersionMismatchIsAcceptedAndShown(t *testing.T) {
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "v2.0.0"
	var logs lockedBuffer
	h := newHarness(t, func(o *devstack.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	// gpu's worker cap is 3: the builds after a release register in approval.
	for id, v := range map[string]string{"old": "v1.9.0", "same": "v2.0.0", "none": "", "newer": "v2.0.0-3-gabc1234", "build": "f00dfeed"} {
		fleet := "gpu"
		if id == "newer" || id == "build" {
			fleet = "approval"
		}
		body := map[string]any{"worker_id": id, "fleet_slug": fleet, "stage": "test"}
		if v != "" {
			body["agent_version"] = v
		}
		h.want(h.do("POST", "/api/worker/register", "secret", body), 201, "")
	}
	h.want(h.do("POST", "/api/worker/register", "secret", map[string]any{"worker_id": "long", "fleet_slug": "gpu", "stage": "test",
		"agent_version": strings.Repeat("v", 129)}), 400, "invalid_argument")

	got := map[string][3]any{}
	for _, w := range h.do("GET", "/api/admin/workers", "op", nil).body["workers"].([]any) {
		wm := w.(map[string]any)
		got[wm["worker_id"].(string)] = [3]any{wm["agent_version"], wm["version_mismatch"], wm["agent_outdated"]}
	}
	want := map[string][3]any{"old": {"v1.9.0", true, true}, "same": {"v2.0.0", false, false}, "none": {"", true, false},
		"newer": {"v2.0.0-3-gabc1234", true, false}, "build": {"f00dfeed", true, false}}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("worker %s: agent_version, version_mismatch, agent_outdated = %v, want %v", id, got[id], w)
		}
	}
	outdated := map[string]any{}
	for _, f := range h.do("GET", "/api/admin/fleets", "op", nil).body["fleets"].([]any) {
		fm := f.(map[string]any)
		outdated[fm["fleet_slug"].(string)] = fm["outdated_agents"]
	}
	if outdated["gpu"] != 1.0 || outdated["approval"] != 0.0 {
		t.Errorf("outdated_agents by fleet = %v, want gpu 1 and the others 0", outdated)
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
	sort.Strings(warned)
	if strings.Join(warned, ",") != "build=f00dfeed,newer=v2.0.0-3-gabc1234,none=,old=v1.9.0" {
		t.Errorf("warnings for %v, want every worker but same", warned)
	}
}
