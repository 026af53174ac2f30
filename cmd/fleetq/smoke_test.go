package main

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

// TestSmokeRunsAJobThroughAFleet runs fleetq smoke against the dev stack
// with its local fleet: the fleet starts at zero, the scaler launches an
// instance whose agent registers and runs the job, and the command prints
// the job's timeline. A job the runner refuses ends dead, exit 3.
func TestSmokeRunsAJobThroughAFleet(t *testing.T) {
	stack, err := devstack.Start(context.Background(), devstack.Options{
		Addr: "127.0.0.1:0", Config: fleetconfig.Default(), Logger: slog.New(slog.DiscardHandler), OperatorToken: "op-token",
		Fleet: devstack.FleetOptions{Tick: time.Second, BootDelay: time.Second, LocalAgents: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	smoke := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		args = append([]string{"smoke", "--stage", "dev", "--api", stack.URL, "--operator-token", "op-token", "--interval", "200ms", "--timeout", "2m"}, args...)
		code := runCLI(t.Context(), args, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, errOut := smoke()
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// The default workflow is the first of the stage's first fleet.
	want := fleetconfig.Default().Fleets[0]
	for _, re := range []string{
		`workflow ` + want.Workflows[0],
		`job smoke-\d+: succeeded, fleet ` + want.Slug + `, 1 attempt`,
		`\+0\.0s\s+queued`,
		`\+\d+\.\ds\s+leased worker \S+ attempt 1`,
		`\+\d+\.\ds\s+succeeded`,
		`waited \d+\.\ds for a worker, ran \d+\.\ds, \d+\.\ds in all`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", re, out)
		}
	}

	code, out, _ = smoke("--input", `{"seconds": -1}`)
	if code != exitJobFailed || !strings.Contains(out, ": dead") || !strings.Contains(out, "bad_input") {
		t.Fatalf("a refused job: exit %d, want %d\n%s", code, exitJobFailed, out)
	}
}
