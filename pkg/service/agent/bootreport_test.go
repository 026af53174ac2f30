package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// A machine whose image lacks the exec runner's program never registers:
// once the program has been missing for RunnerMissingAfter the agent
// reports it on the fleet, once, for its own instance and image, and goes
// on waiting (a program that appears still gets the worker registered).
func TestMissingRunnerIsReportedNotRegistered(t *testing.T) {
	t.Parallel()
	e := newStack(t, true)
	e.create("j1", `{"seconds": 0}`)
	prog := filepath.Join(t.TempDir(), "run-scene")
	e.start("bare", agent.ExecRunner{Command: prog + " --fast"}, func(c *agent.Config) {
		c.Clock, c.ReadyPoll, c.RunnerMissingAfter = e.clock, 10*time.Second, 30*time.Second
		c.ImageID, c.InstanceType = "ami-0123456789abcdef0", "g5.xlarge"
	})
	// Asked at 0s, 10s, 20s: missing, not yet for 30s.
	for i := range 3 {
		testenv.Waiters(t, e.clock, 1)
		if n := e.calls("/api/worker/boot-report"); n != 0 {
			t.Fatalf("a boot report after %ds", i*10)
		}
		e.clock.Advance(10 * time.Second)
	}
	e.waitFor("a boot report", func() bool { return e.calls("/api/worker/boot-report") == 1 })
	// Asked again: no second report, no registration.
	for range 3 {
		testenv.Waiters(t, e.clock, 1)
		e.clock.Advance(10 * time.Second)
	}
	testenv.Waiters(t, e.clock, 1)
	if n, r := e.calls("/api/worker/boot-report"), e.calls("/api/worker/register"); n != 1 || r != 0 {
		t.Fatalf("%d boot reports and %d registrations, want 1 and 0", n, r)
	}
	reports, err := e.stack.Store.BootReports(e.ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 {
		t.Fatalf("boot reports %+v, want one", reports)
	}
	r := reports[0]
	if r.InstanceID != "i-bare" || r.WorkerID != "bare" || r.ImageID != "ami-0123456789abcdef0" || r.InstanceType != "g5.xlarge" ||
		r.Problem != "runner_missing" || !strings.Contains(r.Message, prog+" does not exist") {
		t.Errorf("boot report %+v", r)
	}
	if ws, err := e.stack.Store.ListWorkers(e.ctx, "gpu"); err != nil || len(ws) != 0 {
		t.Errorf("workers %v (%v), want none", ws, err)
	}
	if j := e.job("j1"); j.Status != "queued" || j.Attempts != 0 {
		t.Errorf("job %s after %d attempts, want queued untouched", j.Status, j.Attempts)
	}
	// The program appears: the worker registers.
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Second)
	e.waitFor("a registration", func() bool { return e.calls("/api/worker/register") == 1 })
}
