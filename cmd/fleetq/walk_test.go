package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// TestFirstJobOnAFreshStage walks docs/deploy.md from a deployed stage to
// a first job, with config/prod.yaml as shipped (no tenants, no
// operators) and no second deploy: against the dev stack behind the two
// APIs a stage has (the IAM-authorized API, the key API), signing with
// SigV4 as whoever deployed, the commands of the docs run a smoke job,
// create a tenant's API key and submit a job to the key API with it, then
// let a producer role act for the tenant without a deploy. Nobody and the
// wrong credential are refused by the gateways as in AWS.
func TestFirstJobOnAFreshStage(t *testing.T) {
	cfg, err := fleetconfig.ForStage("prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Tenants) != 0 || len(cfg.Operators) != 0 {
		t.Fatalf("the walk is for prod.yaml as shipped, which names no tenant and no operator: %v %v", cfg.Tenants, cfg.Operators)
	}
	first := cfg.Fleets[0]
	stack := startFleetStack(t, cfg, first.Slug, fleetRunner(t, first))
	apiServer := httptest.NewServer(stack.IAMGateway())
	t.Cleanup(apiServer.Close)
	keyServer := httptest.NewServer(stack.KeyGateway())
	t.Cleanup(keyServer.Close)
	API, KeyAPI := apiServer.URL, keyServer.URL

	// Whoever deployed signs with their own AWS credentials; no operator
	// token anywhere.
	t.Setenv("FLEETQ_OPERATOR_TOKEN", "")
	t.Setenv("FLEETQ_API", "")
	t.Setenv("FLEETQ_API_KEY", "")
	t.Setenv("FLEETQ_KEY_API", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", cfg.Region)
	signAs := func(role, session string) {
		creds := stack.STS.Issue(localaws.STSCaller{Role: role, Session: session})
		t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
		t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
		t.Setenv("AWS_SESSION_TOKEN", creds.SessionToken)
	}
	signAs("Admin", "deployer")
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := runCLI(t.Context(), args, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	// Step 6: fleetq smoke runs a job through the first fleet.
	code, out, errOut := run("smoke", "--stage", "prod", "--api", API, "--key-api", KeyAPI, "--interval", "200ms", "--timeout", "2m")
	if code != 0 || !regexp.MustCompile(`job smoke:smoke-\d+: succeeded, fleet `+first.Slug).MatchString(out) {
		t.Fatalf("smoke: exit %d\n%s%s", code, out, errOut)
	}
	// Its key was for the run only.
	code, out, errOut = run("tenants", "keys", "list", "--api", API, "--tenant", "smoke")
	if code != 0 || !strings.Contains(out, "revoked") || strings.Contains(out, "active") {
		t.Fatalf("the smoke run's key: exit %d\n%s%s", code, out, errOut)
	}

	// A tenant's key, made by whoever deployed, submits to the key API.
	code, out, errOut = run("tenants", "keys", "create", "--api", API, "--tenant", "t1", "--name", "first")
	key := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(key, "fqk1.") {
		t.Fatalf("keys create: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = run("jobs", "submit", "--api", KeyAPI, "--api-key", key, "--workflow", "smoke", "--input", `{"hello": "fleetq"}`)
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "t1:") {
		t.Fatalf("submit with the key: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run("jobs", "wait", "--api", KeyAPI, "--api-key", key, "--interval", "200ms", "--timeout", "2m", id); code != 0 {
		t.Fatalf("wait: exit %d\n%s%s", code, out, errOut)
	}

	// A producer role acts for t1 once an operator maps it: no deploy.
	producer := localaws.RoleARN("t1-producer")
	signAs("t1-producer", "batch")
	if code, _, errOut := run("jobs", "submit", "--api", API, "--workflow", "smoke"); code != 1 || !strings.Contains(errOut, "403 permission_denied") || !strings.Contains(errOut, "fleetq tenants principals add") {
		t.Fatalf("an unmapped producer: exit %d\n%s", code, errOut)
	}
	signAs("Admin", "deployer")
	if code, out, errOut := run("tenants", "principals", "add", "--api", API, "--tenant", "t1", producer); code != 0 || !strings.Contains(out, "acts for tenant t1") {
		t.Fatalf("principals add: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run("tenants", "principals", "list", "--api", API); code != 0 || !strings.Contains(out, producer) || !strings.Contains(out, "table") {
		t.Fatalf("principals list: exit %d\n%s%s", code, out, errOut)
	}
	signAs("t1-producer", "batch")
	code, out, errOut = run("jobs", "submit", "--api", API, "--workflow", "smoke", "--job-id", "by-role")
	if code != 0 || strings.TrimSpace(out) != "t1:by-role" {
		t.Fatalf("the mapped producer submits: exit %d\n%s%s", code, out, errOut)
	}
	// The wrong tenant: t1's role cannot act for another, nor reach the
	// operator routes.
	if code, _, errOut := run("jobs", "submit", "--api", API, "--tenant", "t2", "--workflow", "smoke"); code != 1 || !strings.Contains(errOut, "403 permission_denied") {
		t.Fatalf("t1's role for t2: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := run("tenants", "principals", "list", "--api", API); code != 1 || !strings.Contains(errOut, "403 permission_denied") {
		t.Fatalf("t1's role on an operator route: exit %d\n%s", code, errOut)
	}

	// Nobody: an unsigned request is API Gateway's 403, an operator route
	// on the key API its 404.
	for _, c := range []struct {
		url    string
		status int
	}{{API + "/api/jobs", http.StatusForbidden}, {API + "/api/admin/principals", http.StatusForbidden}, {KeyAPI + "/api/admin/keys", http.StatusNotFound}} {
		res, err := http.Post(c.url, "application/json", strings.NewReader(`{"workflow_id":"smoke"}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.status {
			t.Fatalf("POST %s unsigned: %d, want %d", c.url, res.StatusCode, c.status)
		}
	}
}

// fleetRunner is the runner a fleet's instances run in AWS, built from the
// settings its boot script gives the agent by the worker's own flags.
func fleetRunner(t *testing.T, f fleetconfig.Fleet) agent.Runner {
	t.Helper()
	flags, err := parseWorkerFlags([]string{"--runner", f.Agent.Runner, "--exec", f.Agent.Exec}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := flags.newRunner()
	if err != nil {
		t.Fatal(err)
	}
	return runner
}

// startFleetStack starts the dev stack on cfg with a local fleet whose
// instances run runner for fleet.
func startFleetStack(t *testing.T, cfg *fleetconfig.Config, fleet string, runner agent.Runner) *devstack.Stack {
	t.Helper()
	stack, err := devstack.Start(context.Background(), devstack.Options{
		Addr: "127.0.0.1:0", Config: cfg, Logger: slog.New(slog.DiscardHandler), OperatorToken: "op-token",
		Fleet: devstack.FleetOptions{Tick: time.Second, BootDelay: time.Second, LocalAgents: true,
			AgentConfig: func(f, _ string, c *agent.Config) {
				if f == fleet {
					c.Runner = runner
				}
			}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	return stack
}
