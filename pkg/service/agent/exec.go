package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ExitPermanent is the exit code with which a command says its job can
// never succeed (EX_DATAERR): the job goes dead instead of being retried.
const ExitPermanent = 65

// ExecRunner runs a shell command per job.
//
// The command gets the job as one line of JSON on stdin:
//
//	{"job_id", "tenant_id", "workflow_id", "attempt", "input": {...},
//	 "inputs": {"<name>": "/local/path"}, "output_dir": "/local/dir"}
//
// and a minimal environment of its own (JobEnv), never the agent's: the
// agent's variables may hold its credentials and configuration, and job
// code is the tenant's. Named inputs (input_urls) are downloaded first. The
// command writes its main output to $FLEETQ_OUTPUT_DIR/output and named
// outputs to $FLEETQ_OUTPUT_DIR/<name>; those that exist are uploaded to the
// job's presigned URLs after a successful exit. The last line of stdout is
// the job's result (JSON; any other text is wrapped as {"output": line}).
// Exit 0 is success, ExitPermanent a permanent failure, anything else a
// retryable one; the tail of stderr goes into the error message. A stderr
// line "fleetq-progress: P" (P from 0 to 1, or a percentage "N%") reports
// the job's progress; the next heartbeat carries it.
type ExecRunner struct {
	Command string
	// WorkDir holds each job's input and output directories (default: the
	// system's temporary directory).
	WorkDir string
	// HealthCommand, when set, is run with /bin/sh -c before every lease
	// (and every health check): exit 0 means the machine's engine is ready.
	HealthCommand string
	// PassEnv names variables of the agent's environment that the command
	// also gets (the operator's choice, e.g. a model cache's path); none by
	// default.
	PassEnv []string
}

// defaultPath is the command's PATH when the agent has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// passedThrough are the agent's variables every command gets when set: how
// to find programs and the GPUs, and the locale. None of them is a
// credential.
var passedThrough = []string{"PATH", "LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH",
	"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}

// JobEnv is a command's whole environment: PATH (the agent's, else
// defaultPath), the locale and GPU variables of passedThrough and the
// names in pass when the agent has them, HOME and TMPDIR in the job's own
// directory, and the job's FLEETQ_JOB_* variables. getenv reads the
// agent's environment.
func JobEnv(getenv func(string) string, pass []string, j *Job, dir, inDir, outDir string) []string {
	env := []string{}
	seen := map[string]bool{}
	add := func(k, v string) {
		if !seen[k] {
			seen[k] = true
			env = append(env, k+"="+v)
		}
	}
	add("HOME", filepath.Join(dir, "home"))
	add("TMPDIR", filepath.Join(dir, "tmp"))
	add("FLEETQ_JOB_ID", j.JobID)
	add("FLEETQ_JOB_TENANT_ID", j.TenantID)
	add("FLEETQ_JOB_WORKFLOW_ID", j.WorkflowID)
	add("FLEETQ_JOB_ATTEMPT", strconv.Itoa(j.Attempt))
	add("FLEETQ_INPUT_DIR", inDir)
	add("FLEETQ_OUTPUT_DIR", outDir)
	for _, k := range append(append([]string{}, passedThrough...), pass...) {
		if v := getenv(k); v != "" {
			add(k, v)
		}
	}
	add("PATH", defaultPath)
	return env
}

// Ready answers nil when there is a command, the program it starts exists
// on this machine and is executable (see CommandProblem), and the health
// command (if any) exits 0 within 30 seconds.
func (r ExecRunner) Ready(ctx context.Context) error {
	if strings.TrimSpace(r.Command) == "" {
		return errors.New("exec runner: no command")
	}
	if err := CommandProblem(r.Command); err != nil {
		return err
	}
	if strings.TrimSpace(r.HealthCommand) == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", r.HealthCommand).CombinedOutput()
	if err != nil {
		return fmt.Errorf("health command failed (%v): %s", err, tailOf(out, 512))
	}
	return nil
}

// ErrRunnerMissing marks a runner that cannot run on this machine at all
// (its program is not installed): waiting does not make it ready, the
// machine's image lacks it.
var ErrRunnerMissing = errors.New("runner missing from this machine")

// shellWords start a command line without naming a program to look up:
// shell keywords, builtins and grouping. A command starting with one is
// run by /bin/sh itself.
var shellWords = map[string]bool{
	"if": true, "for": true, "while": true, "until": true, "case": true, "{": true, "(": true, "!": true,
	"exec": true, "cd": true, ".": true, "source": true, "set": true, "export": true, "eval": true,
	"echo": true, "printf": true, "true": true, "false": true, ":": true, "test": true, "[": true,
	"command": true, "read": true, "trap": true, "umask": true, "ulimit": true,
}

// CommandProblem says why the program an exec command line starts cannot
// run here (wrapping ErrRunnerMissing), or nil. The program is the line's
// first word after any NAME=value assignments: a path must be an
// executable file, a bare name must be found on PATH. A line that starts
// with a shell keyword or builtin is not checked (the shell runs it).
func CommandProblem(command string) error {
	prog := ""
	for _, w := range strings.Fields(command) {
		if name, _, ok := strings.Cut(w, "="); ok && name != "" && !strings.ContainsAny(name, "/'\"$") {
			continue // an assignment: FOO=bar cmd
		}
		prog = strings.Trim(w, `'"`)
		break
	}
	if prog == "" || shellWords[prog] || strings.ContainsAny(prog, "$`;|&<>(){}") {
		return nil
	}
	if !strings.Contains(prog, "/") {
		if _, err := exec.LookPath(prog); err != nil {
			return fmt.Errorf("%w: exec runner: %s is not on this machine's PATH (%s): install it in the image", ErrRunnerMissing, prog, os.Getenv("PATH"))
		}
		return nil
	}
	st, err := os.Stat(prog)
	switch {
	case err != nil:
		return fmt.Errorf("%w: exec runner: %s does not exist on this machine: install it in the image", ErrRunnerMissing, prog)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%w: exec runner: %s is not a file", ErrRunnerMissing, prog)
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%w: exec runner: %s is not executable (mode %s)", ErrRunnerMissing, prog, st.Mode().Perm())
	}
	return nil
}

const stderrTail = 2048

func (r ExecRunner) Run(ctx context.Context, j *Job) (json.RawMessage, error) {
	dir, err := os.MkdirTemp(r.WorkDir, "fleetq-job-")
	if err != nil {
		return nil, Retryable(CodeWorkdir, "create job directory: %v", err)
	}
	defer os.RemoveAll(dir)
	inDir, outDir := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	for _, d := range []string{inDir, outDir, filepath.Join(dir, "home"), filepath.Join(dir, "tmp")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, Retryable(CodeWorkdir, "create job directory: %v", err)
		}
	}
	inputs, err := fetchInputs(ctx, j.HTTP, j.InputURLs, inDir)
	if err != nil {
		return nil, err
	}
	stdin, _ := json.Marshal(map[string]any{
		"job_id": j.JobID, "tenant_id": j.TenantID, "workflow_id": j.WorkflowID, "attempt": j.Attempt,
		"input": j.Input, "inputs": inputs, "output_dir": outDir,
	})

	// One line: a command that passes the job through (cat) and then
	// prints its result has that result as its own last line.
	stdin = append(stdin, '\n')

	cmd := exec.Command("/bin/sh", "-c", r.Command)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = io.MultiWriter(&stdout, j.logWriter())
	cmd.Stderr = io.MultiWriter(&progressWriter{buf: &stderr, report: j.Progress}, j.logWriter())
	cmd.Env = JobEnv(os.Getenv, r.PassEnv, j, dir, inDir, outDir)
	// Its own process group, so a stop ends the whole command tree.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, Permanent(CodeExecStart, "start %q: %v", r.Command, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-j.clock().After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		return nil, ctx.Err()
	}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return nil, Retryable(CodeExecWait, "run %q: %v", r.Command, err)
		}
		msg := fmt.Sprintf("command exited with %d", ee.ExitCode())
		if tail := tailOf(stderr.Bytes(), stderrTail); tail != "" {
			msg += ": " + tail
		}
		if ee.ExitCode() == ExitPermanent {
			return nil, Permanent(CodeExitBadInput, "%s", msg)
		}
		return nil, Retryable(exitCode(ee.ExitCode()), "%s", msg)
	}
	if err := uploadOutputs(ctx, j, outDir); err != nil {
		return nil, err
	}
	return resultOf(stdout.Bytes()), nil
}

// uploadOutputs puts output_dir/output to output_url and each named output
// to its URL, for the files the command wrote.
func uploadOutputs(ctx context.Context, j *Job, outDir string) error {
	main, named := j.Outputs()
	targets := map[string]string{}
	if main != "" {
		targets["output"] = main
	}
	for name, url := range named {
		if name == filepath.Base(name) {
			targets[name] = url
		}
	}
	for _, name := range sortedKeys(targets) {
		p := filepath.Join(outDir, name)
		if _, err := os.Stat(p); err != nil {
			continue // not written: nothing to upload
		}
		if err := upload(ctx, j.HTTP, targets[name], p); err != nil {
			return Retryable(CodeOutputUpload, "upload output %q: %v", name, err)
		}
	}
	return nil
}

// resultOf is the last non-empty stdout line as JSON.
func resultOf(stdout []byte) json.RawMessage {
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return nil
	}
	if json.Valid([]byte(last)) {
		return json.RawMessage(last)
	}
	b, _ := json.Marshal(map[string]string{"output": last})
	return b
}

func tailOf(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// progressPrefix starts a progress line on an exec command's stderr.
const progressPrefix = "fleetq-progress:"

// progressWriter keeps stderr in buf and reports its progress lines.
type progressWriter struct {
	buf    *bytes.Buffer
	line   []byte
	report func(float64)
}

func (w *progressWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for _, b := range p {
		if b != '\n' {
			if len(w.line) < 256 {
				w.line = append(w.line, b)
			}
			continue
		}
		if v, ok := parseProgress(string(w.line)); ok && w.report != nil {
			w.report(v)
		}
		w.line = w.line[:0]
	}
	return len(p), nil
}

// parseProgress reads "fleetq-progress: 0.42" or "fleetq-progress: 42%".
func parseProgress(line string) (float64, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), progressPrefix)
	if !ok {
		return 0, false
	}
	rest = strings.TrimSpace(rest)
	scale := 1.0
	if pct, ok := strings.CutSuffix(rest, "%"); ok {
		rest, scale = strings.TrimSpace(pct), 100
	}
	v, err := strconv.ParseFloat(rest, 64)
	if err != nil || v < 0 || v/scale > 1 {
		return 0, false
	}
	return v / scale, true
}
