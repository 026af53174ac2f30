package system_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/runtimeapi"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// runtimeAPI is a Lambda Runtime API as Lambda serves it to a custom
// runtime: it records the init error a function posts, and answers the
// first poll for an invocation with 410 Gone (the sandbox going away), so
// a function that started exits.
type runtimeAPI struct {
	mu        sync.Mutex
	initError map[string]string
	errType   string
	polled    bool
}

func (r *runtimeAPI) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case req.Method == http.MethodPost && req.URL.Path == "/2018-06-01/runtime/init/error":
		r.errType = req.Header.Get("Lambda-Runtime-Function-Error-Type")
		body, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(body, &r.initError); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"status":"OK"}`))
	case req.Method == http.MethodGet && req.URL.Path == "/2018-06-01/runtime/invocation/next":
		r.polled = true
		w.WriteHeader(http.StatusGone)
	default:
		http.NotFound(w, req)
	}
}

// buildBootstrap builds a function's main for this machine in the test's
// own build configuration (testenv.BuildBinary). make build builds it static
// with -tags lambda.norpc for arm64; none of that changes the start-up path.
func buildBootstrap(t *testing.T, fn awsenv.Function) string {
	t.Helper()
	return testenv.BuildBinary(t, filepath.Join("..", "..", "..", "functions", string(fn)), "bootstrap")
}

// run starts bootstrap with exactly env (and the Runtime API's address), as
// Lambda would, and waits for it to exit.
func run(t *testing.T, bootstrap string, api *httptest.Server, env ...string) (exitCode int, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bootstrap)
	cmd.Env = append([]string{runtimeapi.EnvAPI + "=" + strings.TrimPrefix(api.URL, "http://"),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "HOME=" + t.TempDir()}, env...)
	var errBuf strings.Builder
	cmd.Stderr = &errBuf
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), errBuf.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, errBuf.String()
}

// A function that cannot start says why through the Runtime API's
// init-error call, so the reason is Lambda's answer to the invocation; one
// that can start goes on to poll for invocations and reports nothing.
func TestBootstrapReportsInitErrorsToTheRuntimeAPI(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the dispatch bootstrap")
	}
	bootstrap := buildBootstrap(t, awsenv.Dispatch)

	rt := &runtimeAPI{}
	srv := httptest.NewServer(rt)
	defer srv.Close()
	// The stage is set but the groups dispatch wakes are not.
	code, stderr := run(t, bootstrap, srv, awsenv.EnvStage+"=dev")
	rt.mu.Lock()
	got, typ, polled := rt.initError, rt.errType, rt.polled
	rt.mu.Unlock()
	if code == 0 || polled {
		t.Fatalf("exit code %d, polled %v: a function that cannot start must exit before polling", code, polled)
	}
	if typ != runtimeapi.InitErrorType || got["errorType"] != runtimeapi.InitErrorType ||
		!strings.Contains(got["errorMessage"], awsenv.EnvFleetGroups) || !strings.Contains(got["errorMessage"], "dispatch") {
		t.Fatalf("init error %v (header %q), want %s naming %s", got, typ, runtimeapi.InitErrorType, awsenv.EnvFleetGroups)
	}
	if !strings.Contains(stderr, awsenv.EnvFleetGroups) {
		t.Errorf("the log does not say why either: %q", stderr)
	}

	ok := &runtimeAPI{}
	srv2 := httptest.NewServer(ok)
	defer srv2.Close()
	run(t, bootstrap, srv2, awsenv.EnvStage+"=dev", awsenv.EnvFleetGroups+`={"demo":"fleetq-dev-demo"}`)
	ok.mu.Lock()
	defer ok.mu.Unlock()
	if ok.initError != nil || !ok.polled {
		t.Fatalf("a function with its environment: init error %v, polled %v", ok.initError, ok.polled)
	}
}
