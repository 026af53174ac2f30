package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

func TestFleetsPrintsTheLastDecision(t *testing.T) {
	t.Parallel()
	stack, err := devstack.Start(context.Background(), devstack.Options{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), DynamoDBEndpoint: testenv.StackDynamoDB(t),
		OperatorToken: "op-token", Fleet: devstack.FleetOptions{Tick: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	if _, err := stack.Scaler.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := runCLI(t.Context(), []string{"fleets", "--api", stack.URL, "--operator-token", "op-token", "--history"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "LAST DECISION") || !strings.Contains(out.String(), "demo ") || !strings.Contains(out.String(), "hold 0: no work") {
		t.Fatalf("output:\n%s", out.String())
	}
	code = runCLI(t.Context(), []string{"fleets", "--api", stack.URL, "--operator-token", "wrong"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "401 unauthenticated") {
		t.Fatalf("wrong token: exit %d, %s", code, errOut.String())
	}
}

// Without an operator token the request is signed for API Gateway's IAM
// authorization with the default AWS credentials.
func TestFleetsSignsWithSigV4WithoutAToken(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"fleets":[]}`))
	}))
	defer srv.Close()
	t.Setenv("FLEETQ_OPERATOR_TOKEN", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"fleets", "--api", srv.URL}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/execute-api/aws4_request") {
		t.Fatalf("Authorization = %q", auth)
	}
}

// After an upgrade the listing counts each fleet's workers still on an
// older release's agent.
func TestFleetsCountsWorkersOnAnOlderAgent(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"fleets":[{"fleet_slug":"render","stage":"prod","workflows":[],"queued":0,"leased":2,"desired":3,"in_service":3,"workers":3,"outdated_agents":2,"min":0,"max":8,"last_decision":null},` +
			`{"fleet_slug":"video","stage":"prod","workflows":[],"queued":0,"leased":0,"desired":1,"in_service":1,"workers":1,"outdated_agents":0,"min":0,"max":8,"last_decision":null}]}`))
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"fleets", "--api", srv.URL, "--operator-token", "op-token"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 3 || !strings.Contains(lines[1], "render") || !strings.Contains(lines[1], "3 (2 older)") || strings.Contains(lines[2], "older") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// --boot prints each fleet's boot timeline: every phase with its median,
// 95th percentile and longest, the slowest marked; a fleet without one
// says so.
func TestFleetsBootPrintsTheTimeline(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"fleets":[{"fleet_slug":"video","stage":"prod","workflows":[],"queued":0,"leased":2,"desired":3,"in_service":3,"workers":3,"min":0,"max":8,"last_decision":null,` +
			`"boot":{"workers":3,"slowest":"launch_to_agent","phases":[{"name":"launch_to_agent","workers":2,"p50_s":180,"p95_s":240,"max_s":240},` +
			`{"name":"pool_start_to_agent","workers":1,"p50_s":24.5,"p95_s":24.5,"max_s":24.5},{"name":"runner_ready_to_warmed_up","workers":3,"p50_s":61,"p95_s":75,"max_s":75}]}},` +
			`{"fleet_slug":"render","stage":"prod","workflows":[],"queued":0,"leased":0,"desired":0,"in_service":0,"workers":0,"min":0,"max":8,"last_decision":null}]}`))
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"fleets", "--api", srv.URL, "--operator-token", "op-token", "--boot"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	text := out.String()
	for _, want := range []string{
		"video boot over 3 workers; slowest: launch_to_agent",
		"launch_to_agent            2        180.0s  240.0s  240.0s  <- slowest",
		"pool_start_to_agent        1        24.5s   24.5s   24.5s",
		"runner_ready_to_warmed_up  3        61.0s   75.0s   75.0s",
		"render boot: no worker reported one",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}
