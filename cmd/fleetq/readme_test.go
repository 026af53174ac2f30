package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// The section of docs/api.md whose indented shell lines
// TestCommandLineExamples runs (the README's own blocks are
// TestReadmeRunsAsWritten's).
const (
	cliExamplesDoc     = "../../docs/api.md"
	cliExamplesSection = "From the command line"
)

// readmeLine is one shell command of the README, continuation lines
// joined.
type readmeLine struct {
	no   int
	text string
}

// readmeCommands extracts the shell commands of a document's section:
// its indented lines, comments, blank lines and `make` lines (the test
// starts the stack itself) left out, lines ending in a backslash joined
// with the next.
func readmeCommands(t *testing.T, path, want string) []readmeLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out     []readmeLine
		section string
		pending *readmeLine
		fenced  bool
	)
	sc := bufio.NewScanner(f)
	for no := 1; sc.Scan(); no++ {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = strings.TrimSpace(h)
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced // a fenced block (the config examples) is not shell
			continue
		}
		indented := !fenced && strings.HasPrefix(line, "    ")
		if !indented || section != want || strings.HasPrefix(strings.TrimSpace(line), "make ") {
			continue
		}
		text := strings.TrimSpace(line)
		if pending != nil {
			pending.text += " " + strings.TrimSuffix(text, `\`)
			if !strings.HasSuffix(text, `\`) {
				out = append(out, *pending)
				pending = nil
			}
			continue
		}
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if body, ok := strings.CutSuffix(text, `\`); ok {
			pending = &readmeLine{no: no, text: strings.TrimSpace(body)}
			continue
		}
		out = append(out, readmeLine{no: no, text: text})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if pending != nil {
		t.Fatalf("%s:%d: a continued line never ends: %q", path, pending.no, pending.text)
	}
	if len(out) == 0 {
		t.Fatalf("no commands found in %s's section %q", path, want)
	}
	return out
}

// buildFleetq builds the CLI once into a temporary directory.
func buildFleetq(t *testing.T) string {
	t.Helper()
	return testenv.BuildBinary(t, ".", "fleetq")
}

// startReadmeStack runs the dev stack as `make serve` does, with a local
// fleet whose instances boot in a second and run the real agent (sleep
// runner), and the scaler ticking every second. It answers the URL of a
// proxy in front of the API that checks every exchange against the
// OpenAPI document.
func startReadmeStack(t *testing.T) (*devstack.Stack, string) {
	t.Helper()
	stack, err := devstack.Start(context.Background(), devstack.Options{
		Addr: "127.0.0.1:0", Config: fleetconfig.Default(), Logger: slog.New(slog.DiscardHandler),
		Fleet: devstack.FleetOptions{Tick: time.Second, BootDelay: time.Second, LocalAgents: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	return stack, checkedAPI(t, stack.URL)
}

var (
	// readmeVarRef is a shell variable a command names (other than the
	// stack's own API, SECRET and OP).
	readmeVarRef = regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)`)
	// readmeAssign is `NAME=$(command)`, with an optional trailing comment.
	readmeAssign = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=\$\((.*)\)(\s+#.*)?$`)
	readmeStatus = regexp.MustCompile(`--status\s+(\S+)`)
)

// TestCommandLineExamples runs the shell lines of docs/api.md's "From the
// command line" section against a dev stack with a local fleet, as a
// reader would type them: API, SECRET and OP are set, `bin/fleetq` is a
// fleetq binary built once, and a `NAME=$(...)` line sets NAME for the
// lines after it. Each line must exit 0 and print what the section says it
// does. A line this test does not know how to check fails it, so an edited
// section cannot go unrun. Not run: the `API=... SECRET=... OP=...` line
// (the test sets them) and `make serve` itself (the test starts the same
// stack in process). The Python client's README example runs alongside,
// against the same stack.
func TestCommandLineExamples(t *testing.T) {
	t.Parallel()
	cmds := readmeCommands(t, cliExamplesDoc, cliExamplesSection)
	bin := buildFleetq(t)
	stack, api := startReadmeStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	python := make(chan func(), 1)
	go func() { python <- runPythonReadme(ctx, t, stack, api) }()

	_, noCurl := exec.LookPath("curl")
	vars := map[string]string{"API": api, "SECRET": stack.FleetSecrets["demo"], "OP": stack.OperatorToken}
	env := func() []string {
		e := os.Environ()
		for k, v := range vars {
			e = append(e, k+"="+v)
		}
		return e
	}
	run := func(l readmeLine, script string) (string, string, error) {
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Env = env()
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		t.Logf("docs/api.md:%d: %s\n%s%s", l.no, l.text, out.String(), errOut.String())
		return out.String(), errOut.String(), err
	}
	// idOf is the job a line names: the value of the last variable it
	// uses other than the stack's own.
	idOf := func(l readmeLine) string {
		id := ""
		for _, m := range readmeVarRef.FindAllStringSubmatch(l.text, -1) {
			if !slices.Contains([]string{"API", "SECRET", "OP", "KEY"}, m[1]) {
				id = vars[m[1]]
			}
		}
		if id == "" {
			t.Errorf("docs/api.md:%d: %q names no job the lines before it submitted", l.no, l.text)
		}
		return id
	}
	waited := map[string]bool{}
	canceled := map[string]bool{}
	seen := map[string]bool{}
	for _, l := range cmds {
		if ctx.Err() != nil {
			t.Fatalf("docs/api.md:%d: not reached within the test's deadline", l.no)
		}
		line := strings.ReplaceAll(l.text, "bin/fleetq", bin)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Errorf("docs/api.md:%d: %s: %s", l.no, l.text, fmt.Sprintf(format, args...))
		}
		var kind string
		switch {
		case strings.HasPrefix(line, "API="):
			kind = "env"
			for _, name := range []string{"API=", "SECRET=", "OP="} {
				if !strings.Contains(line, name) {
					fail("the line that sets the stack's variables no longer sets %s (the test sets API, SECRET and OP)", strings.TrimSuffix(name, "="))
				}
			}
			continue // the test has set them to its own stack's
		case readmeAssign.MatchString(line):
			m := readmeAssign.FindStringSubmatch(line)
			kind = "submit"
			name := m[1]
			out, errOut, err := run(l, line+"\nrc=$?; printf '%s' \"$"+name+"\"; exit $rc")
			id := strings.TrimSpace(out)
			if err != nil || id == "" || strings.ContainsAny(id, " \n") {
				fail("exit %v, %s=%q: %s", err, name, id, errOut)
				break
			}
			switch {
			case strings.Contains(m[2], bin+" tenants keys create "):
				// A tenant's API key, which the lines after it use.
				kind = "key"
				if name != "KEY" || !strings.HasPrefix(id, "fqk1.") {
					fail("want KEY set to an API key (fqk1.…), got %s=%q", name, id)
				}
			case !strings.Contains(m[2], bin+" jobs submit "):
				fail("sets %s from something other than `fleetq jobs submit` or `fleetq tenants keys create`; add its check to this test", name)
			}
			vars[name] = id
		case strings.Contains(line, bin+" jobs wait "):
			kind = "wait"
			id := idOf(l)
			out, errOut, err := run(l, line)
			if err != nil || !strings.Contains(out, id) || !regexp.MustCompile(`(?m)^status\s+succeeded$`).MatchString(out) {
				fail("exit %v, want the job %s succeeded:\n%s%s", err, id, out, errOut)
			}
			waited[id] = true
		case strings.Contains(line, bin+" jobs get "):
			kind = "get"
			id := idOf(l)
			out, errOut, err := run(l, line)
			want := `(queued|leased|succeeded|dead|canceled)`
			if waited[id] {
				want = "succeeded"
			}
			if err != nil || !regexp.MustCompile(`(?m)^job\s+`+regexp.QuoteMeta(id)+`$`).MatchString(out) ||
				!regexp.MustCompile(`(?m)^status\s+`+want+`$`).MatchString(out) || !regexp.MustCompile(`(?m)^attempts\s+\d+ of \d+`).MatchString(out) {
				fail("exit %v, want job %s with status %s and attempts:\n%s%s", err, id, want, out, errOut)
			}
			if waited[id] && !regexp.MustCompile(`(?m)^result\s+\{`).MatchString(out) {
				fail("no result row for a succeeded job:\n%s", out)
			}
		case strings.Contains(line, bin+" jobs logs "):
			kind = "logs"
			id := idOf(l)
			out, errOut, err := run(l, line)
			if want := "sleep: job " + id + " attempt 1 sleeps "; err != nil || !strings.Contains(out, want) {
				fail("exit %v, want the runner's line %q:\n%s%s", err, want, out, errOut)
			}
		case strings.Contains(line, bin+" why ") && strings.Contains(line, "--fleet "):
			kind = "why fleet"
			out, errOut, err := run(l, line)
			if err != nil || !strings.HasPrefix(out, "fleet demo: desired ") || !strings.Contains(out, "\nlast decision ") || !strings.Contains(out, "\nwhat would change it: ") {
				fail("exit %v, want the demo fleet's size, last decision and what would change it:\n%s%s", err, out, errOut)
			}
		case strings.Contains(line, bin+" why "):
			kind = "why"
			id := idOf(l)
			out, errOut, err := run(l, line)
			queued := regexp.MustCompile(`(?m)^job ` + regexp.QuoteMeta(id) + ` is queued in fleet demo$`).MatchString(out)
			if err != nil || !queued && !regexp.MustCompile(`(?m)^job `+regexp.QuoteMeta(id)+` is (leased|succeeded|dead|canceled)`).MatchString(out) ||
				queued && (!strings.Contains(out, "  estimated start: ") || !strings.Contains(out, "  waiting on: ")) {
				fail("exit %v, want job %s's status, and while queued its estimate and what it waits on:\n%s%s", err, id, out, errOut)
			}
		case strings.Contains(line, bin+" jobs cancel "):
			kind = "cancel"
			id := idOf(l)
			out, errOut, err := run(l, line)
			if err != nil || strings.TrimSpace(out) != id+"  canceled" {
				fail("exit %v, want %q:\n%s%s", err, id+"  canceled", out, errOut)
			}
			canceled[id] = true
		case strings.Contains(line, bin+" jobs list "):
			kind = "list"
			status := "dead"
			if m := readmeStatus.FindStringSubmatch(line); m != nil {
				status = m[1]
			}
			out, errOut, err := run(l, line)
			rows := strings.Split(strings.TrimSpace(out), "\n")
			if err != nil || !strings.HasPrefix(rows[0], "JOB") || !strings.Contains(rows[0], "STATUS") {
				fail("exit %v, want the jobs table:\n%s%s", err, out, errOut)
				break
			}
			listed := map[string]bool{}
			for _, r := range rows[1:] {
				f := strings.Fields(r)
				if len(f) < 2 || f[1] != status {
					fail("row %q is not a %s job", r, status)
					continue
				}
				listed[f[0]] = true
			}
			if status == "canceled" {
				for id := range canceled {
					if !listed[id] {
						fail("the canceled job %s is not listed:\n%s", id, out)
					}
				}
			}
		case strings.Contains(line, bin+" fleets "):
			kind = "fleets"
			out, errOut, err := run(l, line)
			if err != nil || !strings.HasPrefix(out, "FLEET") || !regexp.MustCompile(`(?m)^demo\s+\d+\s+\d+`).MatchString(out) {
				fail("exit %v, want the fleets table with the demo fleet:\n%s%s", err, out, errOut)
			}
			if strings.Contains(line, "--history") && !strings.Contains(out, "\n\ndemo\n") {
				fail("--history printed no demo section:\n%s", out)
			}
		case strings.Contains(line, bin+" console "):
			kind = "console"
			out, errOut, err := run(l, line)
			u := strings.TrimSpace(out)
			if err != nil || !strings.HasPrefix(u, api+"/console/login?token=") {
				fail("exit %v, want a login URL of %s:\n%s%s", err, api, out, errOut)
				break
			}
			jar, _ := cookiejar.New(nil)
			res, err := (&http.Client{Jar: jar}).Get(u)
			if err != nil {
				fail("open %s: %v", u, err)
				break
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/console/fleets" || !strings.Contains(string(body), "demo") {
				fail("the printed URL led to %d %s: %.300s", res.StatusCode, res.Request.URL, body)
			}
		case strings.HasPrefix(line, "curl "):
			if noCurl != nil {
				t.Logf("docs/api.md:%d: curl is not installed: %q is not run", l.no, l.text)
				continue
			}
			kind = curlKind(line)
			out, errOut, err := run(l, line)
			if err != nil {
				fail("exit %v: %s", err, errOut)
				break
			}
			switch kind {
			case "curl submit":
				var a wire.JobStatusResponse
				if err := json.Unmarshal([]byte(out), &a); err != nil || a.JobID == "" || a.Status != "accepted" {
					fail("want {\"job_id\": ..., \"status\": \"accepted\"}, got %s (%v)", out, err)
				}
			case "curl job":
				id := idOf(l)
				var j wire.Job
				if err := json.Unmarshal([]byte(out), &j); err != nil || j.JobID != id || waited[id] && (j.Status != "succeeded" || len(j.Result) == 0 || len(j.History) == 0) {
					fail("want job %s (succeeded, with result and history once waited for), got %s (%v)", id, out, err)
				}
			case "curl logs":
				id := idOf(l)
				var a wire.JobLogsResponse
				if err := json.Unmarshal([]byte(out), &a); err != nil || a.JobID != id || len(a.Logs) == 0 || a.Logs[0].Attempt != 1 || a.Logs[0].URL == "" {
					fail("want {\"logs\": [{\"attempt\": 1, \"url\": ...}]} of %s, got %s (%v)", id, out, err)
					break
				}
				log := fetch(t, a.Logs[0].URL)
				if want := "sleep: job " + id + " attempt 1"; !strings.Contains(log, want) {
					fail("the presigned log has no %q: %q", want, log)
				}
			default:
				fail("a curl this test does not know how to check; add it")
			}
		default:
			fail("this test does not know how to run and check this line; add it to readme_test.go")
		}
		seen[kind] = true
	}
	required := []string{"key", "submit", "wait", "get", "logs", "why", "why fleet", "cancel", "list", "fleets", "console"}
	if noCurl == nil {
		required = append(required, "curl submit", "curl job", "curl logs")
	}
	for _, k := range required {
		if !seen[k] {
			t.Errorf("docs/api.md's examples no longer show %q; this test expects them to", k)
		}
	}
	if report := <-python; report != nil {
		report()
	}
}

// curlKind names what a curl line of the README asks for.
func curlKind(line string) string {
	switch {
	case strings.Contains(line, "-XPOST $API/api/jobs "):
		return "curl submit"
	case regexp.MustCompile(`\$API/api/jobs/\$[A-Z]+/logs\b`).MatchString(line):
		return "curl logs"
	case regexp.MustCompile(`\$API/api/jobs/\$[A-Z]+(\s|$)`).MatchString(line):
		return "curl job"
	}
	return "curl"
}

func fetch(t *testing.T, u string) string {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Errorf("GET %s: %v", u, err)
		return ""
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %d %s", u, res.StatusCode, body)
	}
	return string(body)
}

// The Python client README's example runs with its two placeholders
// replaced by the stack's URL and operator token, in a directory holding
// the scene.blend it uploads, with clients/python on PYTHONPATH.
const (
	pythonAPIPlaceholder   = `"http://127.0.0.1:8080"`
	pythonTokenPlaceholder = `"<operator token>"`
)

// pythonExample is the first ```python block of the Python client's
// README.
func pythonExample(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	_, rest, ok := strings.Cut(string(data), "```python\n")
	if !ok {
		return "", errors.New("no ```python block")
	}
	code, _, ok := strings.Cut(rest, "```")
	if !ok {
		return "", errors.New("the ```python block never ends")
	}
	for _, p := range []string{pythonAPIPlaceholder, pythonTokenPlaceholder} {
		if !strings.Contains(code, p) {
			return "", fmt.Errorf("the example no longer has %s for the test to replace", p)
		}
	}
	return code, nil
}

// runPythonReadme runs the Python client README's example and answers a
// function that reports what went wrong (on the test's goroutine), or nil.
func runPythonReadme(ctx context.Context, t *testing.T, stack *devstack.Stack, api string) func() {
	python, err := exec.LookPath("python3")
	if err != nil {
		return func() {
			if testenv.OnCI() {
				t.Error("python3 is not installed: under CI the Python client README's example must run")
				return
			}
			t.Log("python3 is not installed: the Python client README's example is not run")
		}
	}
	code, err := pythonExample("../../clients/python/README.md")
	if err != nil {
		return func() { t.Errorf("clients/python/README.md: %v", err) }
	}
	code = strings.Replace(code, pythonAPIPlaceholder, fmt.Sprintf("%q", api), 1)
	code = strings.Replace(code, pythonTokenPlaceholder, fmt.Sprintf("%q", stack.OperatorToken), 1)
	dir := t.TempDir()
	clientDir, err := filepath.Abs("../../clients/python")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "scene.blend"), []byte("a scene for the README example\n"), 0o600)
	}
	if err != nil {
		return func() { t.Error(err) }
	}
	cmd := exec.CommandContext(ctx, python, "-c", code)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH="+clientDir)
	out, err := cmd.CombinedOutput()
	return func() {
		t.Logf("clients/python/README.md example:\n%s", out)
		s := string(out)
		switch {
		case err != nil:
			t.Errorf("the Python client README's example failed: %v", err)
		case !regexp.MustCompile(`(?m)^succeeded \{'slept_seconds': [0-9.]+\} None$`).MatchString(s):
			t.Errorf("the example printed no succeeded job with its result")
		case !regexp.MustCompile(`(?m)^sleep: job \S+ attempt 1 sleeps `).MatchString(s):
			t.Errorf("the example printed no log of the job")
		case !regexp.MustCompile(`(?m)^canceled$`).MatchString(s):
			t.Errorf("the example's cancel did not print canceled")
		}
	}
}
