package agent_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// blobs is a stand-in for presigned S3 URLs: GET serves, PUT stores.
type blobs struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func newBlobs(t *testing.T) (*blobs, *httptest.Server) {
	b := &blobs{objs: map[string][]byte{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch r.Method {
		case http.MethodPut:
			data, _ := io.ReadAll(r.Body)
			b.objs[r.URL.Path] = data
		case http.MethodGet:
			data, ok := b.objs[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(data)
		}
	}))
	t.Cleanup(srv.Close)
	return b, srv
}

func (b *blobs) get(path string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.objs[path])
}

func runExec(t *testing.T, cmd string, j *agent.Job) (json.RawMessage, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	return agent.ExecRunner{Command: cmd}.Run(ctx, j)
}

func TestExecRunner(t *testing.T) {
	t.Parallel()
	store, srv := newBlobs(t)
	store.objs["/in/scene.obj"] = []byte("v 0 0 0")
	job := &agent.Job{Lease: agent.Lease{JobID: "j1", TenantID: "t", Input: json.RawMessage(`{"frames": 3}`),
		InputURLs: map[string]string{"scene": srv.URL + "/in/scene.obj"}, OutputURL: srv.URL + "/out/output",
		OutputURLs: map[string]string{"preview": srv.URL + "/out/preview"}}}

	// Success: reads the job on stdin and its input, writes outputs, the
	// last stdout line is the result.
	res, err := runExec(t, `job=$(cat); echo "working"; cat "$FLEETQ_INPUT_DIR/scene" > "$FLEETQ_OUTPUT_DIR/output"; `+
		`echo "png" > "$FLEETQ_OUTPUT_DIR/preview"; echo "$job" | grep -q '"frames":3' && echo '{"frames_done":3}'`, job)
	if err != nil || string(res) != `{"frames_done":3}` {
		t.Fatalf("result %s, %v", res, err)
	}
	if got := store.get("/out/output"); got != "v 0 0 0" {
		t.Fatalf("output %q", got)
	}
	if got := store.get("/out/preview"); got != "png\n" {
		t.Fatalf("preview %q", got)
	}
	// Plain text as the last line is wrapped.
	res, err = runExec(t, `echo done`, &agent.Job{Lease: agent.Lease{JobID: "j2"}})
	if err != nil || string(res) != `{"output":"done"}` {
		t.Fatalf("plain result %s, %v", res, err)
	}

	for _, c := range []struct {
		cmd       string
		retryable bool
		code      string
		msg       string
	}{
		{`echo "scene is corrupt" >&2; exit 65`, false, "exit_65", "scene is corrupt"},
		{`echo "CUDA out of memory" >&2; exit 3`, true, "exit_3", "CUDA out of memory"},
	} {
		_, err := runExec(t, c.cmd, &agent.Job{Lease: agent.Lease{JobID: "j3"}})
		var je *agent.JobError
		if !errors.As(err, &je) || je.Retryable != c.retryable || je.Code != c.code || !strings.Contains(je.Message, c.msg) {
			t.Fatalf("%q: %+v", c.cmd, err)
		}
	}
	// An input that cannot be fetched is a retryable failure before the command runs.
	_, err = runExec(t, `touch /should-not-run`, &agent.Job{Lease: agent.Lease{JobID: "j4", InputURLs: map[string]string{"x": srv.URL + "/missing"}}})
	var je *agent.JobError
	if !errors.As(err, &je) || !je.Retryable || je.Code != "input_download" {
		t.Fatalf("missing input: %v", err)
	}
	// A stopped job kills the command: the job is stopped once the command
	// says it runs (opening the read end of a FIFO waits for its writer).
	started := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if f, err := os.Open(started); err == nil {
			_, _ = io.ReadAll(f)
			f.Close()
		}
		cancel()
	}()
	// The command would run for an hour: the runner returns only once its
	// SIGTERM has ended it (the job's clock never reaches the SIGKILL that
	// would follow; a command that outlived its job fails after Patience).
	stopped := make(chan error, 1)
	go func() {
		j := &agent.Job{Lease: agent.Lease{JobID: "j5"}, Clock: clock.NewFake(time.Now())}
		_, err := (agent.ExecRunner{Command: "echo up > " + started + "; sleep 3600"}).Run(ctx, j)
		stopped <- err
	}()
	if err := testenv.Receive(t, "the command ended with its job", stopped); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}

func TestExecRunnerReportsProgressLines(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []float64
	j := &agent.Job{Lease: agent.Lease{JobID: "p1"}, Progress: func(p float64) { mu.Lock(); seen = append(seen, p); mu.Unlock() }}
	_, err := runExec(t, `echo "fleetq-progress: 0.25" >&2; echo "loading" >&2; echo "fleetq-progress: 60%" >&2; `+
		`echo "fleetq-progress: 7" >&2; printf 'fleetq-progress: 1\n' >&2; echo '{}'`, j)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen) != "[0.25 0.6 1]" {
		t.Fatalf("progress %v", seen)
	}
}

func TestExecRunnerHealthCommand(t *testing.T) {
	t.Parallel()
	flag := filepath.Join(t.TempDir(), "up")
	r := agent.ExecRunner{Command: "true", HealthCommand: "test -f " + flag + " || { echo engine down; exit 1; }"}
	if err := r.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "engine down") {
		t.Fatalf("ready while down: %v", err)
	}
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The exec runner is ready only when the program its command starts is
// on the machine and executable: a missing one says so, and says it is
// missing from the machine rather than down for now.
func TestExecRunnerReadyNeedsItsProgram(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "run-scene")
	plain := filepath.Join(dir, "notes.txt")
	for path, mode := range map[string]os.FileMode{prog: 0o755, plain: 0o644} {
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho '{}'\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		command string
		problem string // "" when ready
	}{
		{prog, ""},
		{prog + " --fast", ""},
		{"MODE=fast " + prog, ""},
		{"cat", ""},
		{"/bin/cat", ""},
		{`echo '{"ok":true}'`, ""},
		{"cat; echo done", ""},
		{`"$HOME/bin/x"`, ""}, // the shell expands it: not checked here
		{filepath.Join(dir, "absent"), "does not exist"},
		{plain, "is not executable"},
		{dir, "is not a file"},
		{"fleetq-no-such-program --x", "is not on this machine's PATH"},
		{"FOO=1 fleetq-no-such-program", "is not on this machine's PATH"},
	} {
		err := agent.ExecRunner{Command: tc.command}.Ready(context.Background())
		switch {
		case tc.problem == "" && err != nil:
			t.Errorf("%q: %v", tc.command, err)
		case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem) || !errors.Is(err, agent.ErrRunnerMissing)):
			t.Errorf("%q: %v, want %q (ErrRunnerMissing)", tc.command, err, tc.problem)
		}
	}
}

// Job code runs without the agent's environment: the agent's credentials
// and configuration stay with the agent; the command gets PATH, a HOME and
// TMPDIR of its own, its job's FLEETQ_JOB_* variables, and what the
// operator passes by name.
func TestExecRunnerGetsNoAgentEnvironment(t *testing.T) {
	for k, v := range map[string]string{
		"FLEETQ_FLEET_SECRET": "fleet-secret", "FLEETQ_FLEET_SECRET_FILE": "/etc/fleetq/fleet-secret",
		"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "aws-secret", "AWS_SESSION_TOKEN": "aws-session",
		"FLEETQ_API": "https://api.example", "FLEETQ_FLEET": "gpu", "MODEL_CACHE": "/models", "PATH": "/opt/tools/bin:/usr/bin:/bin",
	} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	j := &agent.Job{Lease: agent.Lease{JobID: "j-env", TenantID: "t1", WorkflowID: "wf", Attempt: 2}}
	// The command prints its environment, base64 on one line: the result
	// is {"output": "<that line>"}.
	res, err := agent.ExecRunner{Command: `test -d "$HOME" && test -d "$TMPDIR" || exit 9; env | base64 | tr -d '\n'; echo`,
		PassEnv: []string{"MODEL_CACHE", "NOT_SET"}}.Run(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Output string }
	if err := json.Unmarshal(res, &out); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(out.Output)
	if err != nil {
		t.Fatalf("%s: %v", res, err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	for _, k := range []string{"FLEETQ_FLEET_SECRET", "FLEETQ_FLEET_SECRET_FILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "FLEETQ_API", "FLEETQ_FLEET", "NOT_SET"} {
		if v, ok := env[k]; ok {
			t.Errorf("the job's environment has the agent's %s=%q", k, v)
		}
	}
	for k, want := range map[string]string{
		"FLEETQ_JOB_ID": "j-env", "FLEETQ_JOB_TENANT_ID": "t1", "FLEETQ_JOB_WORKFLOW_ID": "wf", "FLEETQ_JOB_ATTEMPT": "2",
		"MODEL_CACHE": "/models", "PATH": "/opt/tools/bin:/usr/bin:/bin",
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"HOME", "TMPDIR", "FLEETQ_INPUT_DIR", "FLEETQ_OUTPUT_DIR"} {
		if !strings.Contains(env[k], "fleetq-job-") {
			t.Errorf("%s = %q, want a path in the job's own directory", k, env[k])
		}
	}
	allowed := map[string]bool{"PWD": true, "SHLVL": true, "_": true, "LANG": true, "LC_ALL": true, "TZ": true, "LD_LIBRARY_PATH": true,
		"CUDA_VISIBLE_DEVICES": true, "NVIDIA_VISIBLE_DEVICES": true, "NVIDIA_DRIVER_CAPABILITIES": true, "LC_CTYPE": true,
		"HOME": true, "TMPDIR": true, "FLEETQ_INPUT_DIR": true, "FLEETQ_OUTPUT_DIR": true, "PATH": true, "MODEL_CACHE": true,
		"FLEETQ_JOB_ID": true, "FLEETQ_JOB_TENANT_ID": true, "FLEETQ_JOB_WORKFLOW_ID": true, "FLEETQ_JOB_ATTEMPT": true}
	for k := range env {
		if !allowed[k] {
			t.Errorf("the job's environment has %s, which JobEnv does not give", k)
		}
	}
}

// The job on stdin is one line of JSON, ending in a newline: a command
// that passes it through (cat, as the dev config's runner and the README's
// worker do) and then prints its result has that result as its last line,
// and cat alone answers the job itself.
func TestExecRunnerStdinIsOneLine(t *testing.T) {
	t.Parallel()
	job := &agent.Job{Lease: agent.Lease{JobID: "l1", TenantID: "t", WorkflowID: "w", Input: json.RawMessage(`{"seconds":5}`)}}
	res, err := runExec(t, `cat; echo '{"ok":true}'`, job)
	if err != nil || string(res) != `{"ok":true}` {
		t.Fatalf("cat; echo: result %s, %v; want {\"ok\":true}", res, err)
	}
	res, err = runExec(t, `cat`, job)
	var echoed struct {
		JobID string          `json:"job_id"`
		Input json.RawMessage `json:"input"`
	}
	if err != nil || json.Unmarshal(res, &echoed) != nil || echoed.JobID != "l1" || string(echoed.Input) != `{"seconds":5}` {
		t.Fatalf("cat: result %s, %v; want the job itself", res, err)
	}
	res, err = runExec(t, `wc -l`, job)
	if err != nil || string(res) != `1` {
		t.Fatalf("wc -l: result %s, %v; want 1 line on stdin", res, err)
	}
}
