package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	shipped "github.com/fleetq/fleetq/config"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// TestSmokeRunsAJobThroughAFleet runs fleetq smoke against the dev stack
// with its local fleet, once with each shipped stage's config: the fleet
// starts at zero, the scaler launches an instance whose agent registers
// and runs the job, and the command prints the job's timeline. The local
// instances run the runner the stage's first fleet runs on EC2, built from
// the settings its boot script gives the agent (FLEETQ_RUNNER, FLEETQ_EXEC)
// by the worker's own flags: a command every image has, so the first job
// of a fresh account succeeds on the stock AMI. A job the sleep runner
// refuses ends dead, exit 3.
func TestSmokeRunsAJobThroughAFleet(t *testing.T) {
	t.Parallel()
	for _, stage := range shipped.Stages() {
		t.Run(stage, func(t *testing.T) {
			cfg, err := fleetconfig.ForStage(stage)
			if err != nil {
				t.Fatal(err)
			}
			first := cfg.Fleets[0]
			if first.Agent.Runner != "exec" {
				t.Fatalf("the %s stage's first fleet runs %q: it must run a command the stock image has", stage, first.Agent.Runner)
			}
			smoke := smokeStack(t, stage, cfg, first.Slug, fleetRunner(t, first))
			code, out, errOut := smoke()
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, out, errOut)
			}
			// The default workflow is the first of the stage's first fleet,
			// and the default input comes back in the result: the command
			// echoes the job it was given.
			for _, re := range []string{
				`workflow ` + first.Workflows[0],
				`job smoke:smoke-\d+: succeeded, fleet ` + first.Slug + `, 1 attempt`,
				`\+0\.0s\s+queued`,
				`\+\d+\.\ds\s+leased worker \S+ attempt 1`,
				`\+\d+\.\ds\s+succeeded`,
				`waited \d+\.\ds for a worker, ran \d+\.\ds, \d+\.\ds in all`,
				`result: \{.*"input":\{"seconds":1\}.*"workflow_id":"` + first.Workflows[0] + `"`,
			} {
				if !regexp.MustCompile(re).MatchString(out) {
					t.Errorf("output lacks %s:\n%s", re, out)
				}
			}
		})
	}
}

// A job the runner refuses ends dead: smoke prints why and exits 3.
func TestSmokeExitsThreeOnADeadJob(t *testing.T) {
	t.Parallel()
	cfg := fleetconfig.Default()
	smoke := smokeStack(t, cfg.Stage, cfg, cfg.Fleets[0].Slug, agent.SleepRunner{})
	code, out, _ := smoke("--input", `{"seconds": -1}`)
	if code != exitJobFailed || !strings.Contains(out, ": dead") || !strings.Contains(out, "bad_input") {
		t.Fatalf("a refused job: exit %d, want %d\n%s", code, exitJobFailed, out)
	}
}

// smokeStack starts the dev stack on cfg, the config of stage, with a
// local fleet whose instances run runner for fleet, and answers a function
// that runs fleetq smoke for stage against it.
func smokeStack(t *testing.T, stage string, cfg *fleetconfig.Config, fleet string, runner agent.Runner) func(args ...string) (int, string, string) {
	t.Helper()
	stack := startFleetStack(t, cfg, fleet, runner)
	return func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		args = append([]string{"smoke", "--stage", stage, "--api", stack.URL, "--operator-token", "op-token", "--interval", "200ms", "--timeout", "2m"}, args...)
		code := runCLI(t.Context(), args, &out, &errOut)
		return code, out.String(), errOut.String()
	}
}
