package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/wire/openapi"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// checkedStack is a dev stack whose URL is a proxy in front of its API
// that checks every exchange against the OpenAPI document (checkedAPI).
type checkedStack struct {
	*devstack.Stack
	URL string
}

// startStack runs a dev stack in process; the scaler does not tick, so no
// local instance takes the test's jobs. Every request the CLI and the test
// send to it is checked against the OpenAPI document.
func startStack(t *testing.T) *checkedStack {
	t.Helper()
	stack, err := devstack.Start(context.Background(), devstack.Options{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), DynamoDBEndpoint: testenv.StackDynamoDB(t),
		OperatorToken: "op-token", Fleet: devstack.FleetOptions{Tick: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	return &checkedStack{Stack: stack, URL: checkedAPI(t, stack.URL)}
}

// checkedAPI serves a proxy in front of the API at api that checks every
// exchange against the OpenAPI document, failing t on a mismatch (the dev
// stack's own /local/ routes are not part of the API), and answers its URL.
func checkedAPI(t *testing.T, api string) string {
	t.Helper()
	v, err := openapi.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(api)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = v.Transport(http.DefaultTransport, func(err error) { t.Errorf("contract: %v", err) }, "/local/")
	checked := httptest.NewServer(proxy)
	t.Cleanup(checked.Close)
	return checked.URL
}

func cli(t *testing.T, stack *checkedStack, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"jobs", args[0], "--api", stack.URL, "--operator-token", stack.OperatorToken}, args[1:]...)
	code := runCLI(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// worker registers and, through the API as a worker would, leases the
// next job dispatch creates.
func leaseNext(t *testing.T, stack *checkedStack) (string, wire.LeasedJob) {
	t.Helper()
	var reg wire.RegisterResponse
	post(t, stack.URL+wire.PathRegister, map[string]string{wire.HeaderFleetSecret: stack.FleetSecrets["demo"]},
		wire.RegisterRequest{WorkerID: "w1", FleetSlug: "demo", Stage: stack.Config.Stage}, http.StatusCreated, &reg)
	var p wire.PollResponse
	testenv.Eventually(t, "a job to lease", stack.Dispatched(), func() bool {
		return post(t, stack.URL+wire.PathPoll, map[string]string{"Authorization": "Bearer " + reg.Token}, wire.PollRequest{}, 0, &p) == http.StatusOK
	})
	return reg.Token, *p.Job
}

func post(t *testing.T, u string, header map[string]string, body any, want int, out any) int {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if want != 0 && res.StatusCode != want {
		t.Fatalf("POST %s: %v", u, wire.ReadError(res))
	}
	if res.StatusCode == http.StatusOK || res.StatusCode == http.StatusCreated {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return res.StatusCode
}

func TestJobsSubmitWaitGetOfAJobThatSucceeds(t *testing.T) {
	t.Parallel()
	stack := startStack(t)
	code, out, errOut := cli(t, stack, "submit", "--tenant", "t1", "--workflow", "demo-sleep", "--job-id", "cli-1", "--input", `{"seconds":1}`)
	if code != 0 || strings.TrimSpace(out) != "t1:cli-1" {
		t.Fatalf("submit: exit %d, %q %s", code, out, errOut)
	}
	// Nobody works on it yet: wait gives up after its timeout.
	if code, _, errOut := cli(t, stack, "wait", "--timeout", "100ms", "--interval", "10ms", "t1:cli-1"); code != 1 || !strings.Contains(errOut, "did not finish within 100ms") {
		t.Fatalf("wait on a queued job: exit %d, %s", code, errOut)
	}

	token, leased := leaseNext(t, stack)
	if leased.JobID != "t1:cli-1" || string(leased.Input) != `{"seconds":1}` {
		t.Fatalf("leased %+v", leased)
	}
	if code, out, _ := cli(t, stack, "get", "t1:cli-1"); code != 0 || !strings.Contains(out, "leased") || !strings.Contains(out, "w1") {
		t.Fatalf("get of a leased job: exit %d\n%s", code, out)
	}
	var done wire.StatusResponse
	post(t, stack.URL+wire.PathComplete, map[string]string{"Authorization": "Bearer " + token},
		wire.CompleteRequest{LeaseRef: wire.LeaseRef{JobID: leased.JobID, LeaseToken: leased.LeaseToken}, Result: json.RawMessage(`{"frames":24}`)}, http.StatusOK, &done)

	code, out, errOut = cli(t, stack, "wait", "--interval", "10ms", "t1:cli-1")
	if code != 0 || !strings.Contains(out, "succeeded") || !strings.Contains(out, `{"frames":24}`) || !strings.Contains(out, "1 of 3") {
		t.Fatalf("wait: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = cli(t, stack, "get", "--json", "t1:cli-1")
	var j wire.Job
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil || j.Status != "succeeded" || string(j.Result) != `{"frames":24}` {
		t.Fatalf("get --json: exit %d, %v: %s", code, err, out)
	}
	if code, _, errOut := cli(t, stack, "cancel", "t1:cli-1"); code != 1 || !strings.Contains(errOut, "409 conflict") {
		t.Fatalf("cancel of a succeeded job: exit %d, %s", code, errOut)
	}
	if code, _, errOut := cli(t, stack, "retry", "t1:cli-1"); code != 1 || !strings.Contains(errOut, "409 conflict") {
		t.Fatalf("retry of a succeeded job: exit %d, %s", code, errOut)
	}

	// A job its worker fails for good is dead; wait says so, retry queues it again.
	if code, _, errOut := cli(t, stack, "submit", "--tenant", "t1", "--workflow", "demo-sleep", "--job-id", "cli-3"); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	token, leased = leaseNext(t, stack)
	no := false
	var outcome wire.OutcomeResponse
	post(t, stack.URL+wire.PathFail, map[string]string{"Authorization": "Bearer " + token},
		wire.FailRequest{LeaseRef: wire.LeaseRef{JobID: leased.JobID, LeaseToken: leased.LeaseToken}, Error: &wire.FailError{Message: "out of memory", Code: "oom", Retryable: &no}}, http.StatusOK, &outcome)
	if code, out, _ := cli(t, stack, "wait", "--interval", "10ms", "t1:cli-3"); code != exitJobFailed || !strings.Contains(out, "dead") || !strings.Contains(out, "oom: out of memory (retryable false)") {
		t.Fatalf("wait on a dead job: exit %d\n%s", code, out)
	}
	if code, out, errOut := cli(t, stack, "retry", "t1:cli-3"); code != 0 || strings.TrimSpace(out) != "t1:cli-3  queued" {
		t.Fatalf("retry: exit %d, %q %s", code, out, errOut)
	}
	code, out, _ = cli(t, stack, "list", "--status", "succeeded", "--fleet", "demo")
	if code != 0 || !strings.Contains(out, "JOB") || !strings.Contains(out, "t1:cli-1") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
}

func TestJobsCancelThenWaitSaysCanceled(t *testing.T) {
	t.Parallel()
	stack := startStack(t)
	if code, _, errOut := cli(t, stack, "submit", "--tenant", "t1", "--workflow", "demo-sleep", "--job-id", "cli-2"); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	// Cancel needs the job dispatch creates; until then it is not found.
	testenv.Eventually(t, "the job to be dispatched", stack.Dispatched(), func() bool {
		code, _, errOut := cli(t, stack, "get", "t1:cli-2")
		if code != 0 && !strings.Contains(errOut, "404 not_found") {
			t.Fatalf("get before dispatch: exit %d, %s", code, errOut)
		}
		return code == 0
	})
	if code, out, errOut := cli(t, stack, "cancel", "t1:cli-2"); code != 0 || strings.TrimSpace(out) != "t1:cli-2  canceled" {
		t.Fatalf("cancel: exit %d, %q %s", code, out, errOut)
	}
	if code, out, _ := cli(t, stack, "wait", "--interval", "10ms", "t1:cli-2"); code != exitJobFailed || !strings.Contains(out, "canceled") {
		t.Fatalf("wait on a canceled job: exit %d\n%s", code, out)
	}
	if code, out, _ := cli(t, stack, "cancel", "t1:cli-2"); code != 0 || strings.TrimSpace(out) != "t1:cli-2  canceled" {
		t.Fatalf("second cancel: exit %d, %q", code, out)
	}
	if code, out, _ := cli(t, stack, "list", "--status", "canceled", "--json"); code != 0 || !strings.Contains(out, `"job_id":"t1:cli-2"`) {
		t.Fatalf("list --json: exit %d\n%s", code, out)
	}
}

func TestJobsRefusesBadInputClearly(t *testing.T) {
	t.Parallel()
	stack := startStack(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"get", "nope"}, 1, "404 not_found"},
		{[]string{"retry", "nope"}, 1, "404 not_found"},
		{[]string{"get"}, 2, "exactly one job id"},
		{[]string{"submit", "--tenant", "t1"}, 1, "400 invalid_argument"},
		{[]string{"submit", "--tenant", "t1", "--workflow", "demo-sleep", "--input", "{"}, 1, "--input is not JSON"},
		{[]string{"list", "--status", "exploded"}, 1, "400 invalid_argument"},
		{[]string{"frobnicate"}, 2, "unknown subcommand"},
	} {
		code, _, errOut := cli(t, stack, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %s; want exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
	if code, _, errOut := cli(t, stack, "get", "--operator-token", "wrong", "x"); code != 1 || !strings.Contains(errOut, "401 unauthenticated") {
		t.Fatalf("wrong token: exit %d, %s", code, errOut)
	}
}

func TestJobsLogsPrintsTheAttemptsLog(t *testing.T) {
	t.Parallel()
	stack := startStack(t)
	if code, _, errOut := cli(t, stack, "submit", "--tenant", "t1", "--workflow", "demo-sleep", "--job-id", "logged"); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	_, leased := leaseNext(t, stack)
	if leased.LogURL == "" {
		t.Fatal("the lease carries no log_url")
	}
	if code, _, errOut := cli(t, stack, "logs", "t1:logged"); code != 1 || !strings.Contains(errOut, "attempt 1 of job t1:logged has no log") {
		t.Fatalf("logs before the upload: exit %d, %s", code, errOut)
	}
	// The worker uploads its output's tail through the lease's URL.
	req, _ := http.NewRequest(http.MethodPut, leased.LogURL, strings.NewReader("loading model\nrendered 24 frames\n"))
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("PUT log: %v %v", res, err)
	}
	res.Body.Close()
	if code, out, errOut := cli(t, stack, "logs", "t1:logged"); code != 0 || out != "loading model\nrendered 24 frames\n" {
		t.Fatalf("logs: exit %d, %q %s", code, out, errOut)
	}
	if code, out, _ := cli(t, stack, "logs", "--all", "t1:logged"); code != 0 || out != "==> attempt 1 <==\nloading model\nrendered 24 frames\n" {
		t.Fatalf("logs --all: exit %d, %q", code, out)
	}
	if code, _, errOut := cli(t, stack, "logs", "--attempt", "2", "t1:logged"); code != 2 || !strings.Contains(errOut, "no attempt 2") {
		t.Fatalf("logs --attempt 2: exit %d, %s", code, errOut)
	}
	code, out, _ := cli(t, stack, "logs", "--json", "t1:logged")
	var a wire.JobLogsResponse
	if err := json.Unmarshal([]byte(out), &a); code != 0 || err != nil || len(a.Logs) != 1 || a.Logs[0].Attempt != 1 {
		t.Fatalf("logs --json: exit %d, %v: %s", code, err, out)
	}
}
