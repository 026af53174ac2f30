package console_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/version"
	"github.com/fleetq/fleetq/pkg/service/console"
)

// After an upgrade, the workers still running the previous release's agent
// are marked "older" on the workers page, told apart from an agent that is
// merely another build, and the fleets page counts them.
func TestWorkersOnAnOlderAgentAreMarked(t *testing.T) {
	t.Parallel()
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "v1.3.0"
	e := newEnv(t, "console-key")
	e.ops.workers = []wire.Worker{
		{WorkerID: "w-old", FleetSlug: "render", Status: "active", AgentVersion: "v1.2.4", VersionMismatch: true, AgentOutdated: true},
		{WorkerID: "w-new", FleetSlug: "render", Status: "active", AgentVersion: "v1.3.0"},
		{WorkerID: "w-own", FleetSlug: "render", Status: "active", VersionMismatch: true},
	}
	e.ops.fleets = []wire.Fleet{{FleetSlug: "render", Workers: 3, OutdatedAgents: 1}}
	ck := e.session()

	_, page := e.get(console.PathWorkers, ck)
	cell := func(worker string) string {
		m := regexp.MustCompile(`(?s)<tr data-worker="` + worker + `">.*?<td class="agent">(.*?)</td>`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no agent cell for %s on the workers page: %.500s", worker, page)
		}
		return m[1]
	}
	if c := cell("w-old"); !strings.Contains(c, "v1.2.4") || !strings.Contains(c, ">older<") || !strings.Contains(c, "v1.3.0") {
		t.Errorf("w-old's agent cell %q: want its version, marked older than the stack's v1.3.0", c)
	}
	if c := cell("w-new"); strings.Contains(c, "older") || strings.Contains(c, "mismatch") {
		t.Errorf("w-new runs the stack's release, yet its cell says %q", c)
	}
	if c := cell("w-own"); strings.Contains(c, "older") || !strings.Contains(c, "mismatch") {
		t.Errorf("w-own reported no version: its cell %q should say mismatch, not older", c)
	}

	_, page = e.get(console.PathFleets, ck)
	m := regexp.MustCompile(`(?s)<tr data-fleet="render">.*?<td class="n workers">(.*?)</td>`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(m[1], "1 on an older agent") || !strings.Contains(m[1], `href="/console/workers"`) {
		t.Errorf("the fleets page's workers cell for render = %q, want it to count 1 worker on an older agent and link the workers", m)
	}
	e.ops.fleets = []wire.Fleet{{FleetSlug: "render", Workers: 3}}
	if _, page = e.get(console.PathFleets, ck); strings.Contains(page, "older agent") {
		t.Error("the fleets page speaks of older agents when there are none")
	}
}
