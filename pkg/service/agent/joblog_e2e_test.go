package agent_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// jobLogs fetches GET /api/jobs/{id}/logs and then each attempt's log.
func (e *stackEnv) jobLogs(id string) []string {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.stack.URL+"/api/jobs/"+id+"/logs", nil)
	req.Header.Set("Authorization", "Bearer "+e.stack.OperatorToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		e.t.Fatalf("logs route: %d %s", res.StatusCode, raw)
	}
	var out struct {
		JobID string `json:"job_id"`
		Logs  []struct {
			Attempt int    `json:"attempt"`
			URL     string `json:"url"`
		} `json:"logs"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.JobID != id {
		e.t.Fatalf("logs route answered %s (%v)", raw, err)
	}
	var logs []string
	for i, l := range out.Logs {
		if l.Attempt != i+1 {
			e.t.Fatalf("log %d is of attempt %d", i, l.Attempt)
		}
		res, err := http.Get(l.URL)
		if err != nil {
			e.t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			e.t.Fatalf("GET log of attempt %d: %d %s", l.Attempt, res.StatusCode, body)
		}
		logs = append(logs, string(body))
	}
	return logs
}

// A command's stdout and stderr reach the producer through the logs route,
// cut to their tail when large.
func TestRunnerOutputIsTheJobsLog(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	e.create("chatty", `{}`)
	e.create("quiet", `{}`)
	const tailBytes = 64 << 10
	// chatty: ~590 KB of numbered lines on stdout (stderr is checked with
	// quiet: two pipes interleave in no fixed order).
	cmd := `if [ "$FLEETQ_JOB_ID" = quiet ]; then echo "a warning" >&2; echo '{"ok":true}'; exit 0; fi
seq 1 100000; echo '{"lines":100000}'`
	e.start("exec-logs", agent.ExecRunner{Command: cmd}, func(c *agent.Config) { c.LogTailBytes = tailBytes })
	e.waitFor("both jobs to succeed", func() bool {
		return e.job("chatty").Status == job.Succeeded && e.job("quiet").Status == job.Succeeded
	})

	logs := e.jobLogs("chatty")
	if len(logs) != 1 {
		t.Fatalf("%d logs, want one per attempt", len(logs))
	}
	log := logs[0]
	if !strings.HasPrefix(log, "[fleetq: the first ") || !strings.HasSuffix(log, "100000\n{\"lines\":100000}\n") {
		t.Fatalf("the log does not keep the tail: starts %q, ends %q", log[:min(80, len(log))], log[max(0, len(log)-60):])
	}
	header, body, _ := strings.Cut(log, "\n")
	if len(body) != tailBytes {
		t.Fatalf("the log keeps %d bytes after its header, want the last %d", len(body), tailBytes)
	}
	total := len(`{"lines":100000}` + "\n")
	for i := 1; i <= 100000; i++ {
		total += len(fmt.Sprint(i)) + 1
	}
	if want := fmt.Sprintf("the first %d bytes", total-tailBytes); !strings.Contains(header, want) {
		t.Fatalf("header %q does not say %q", header, want)
	}
	// stdout and stderr are read from two pipes, so only each stream's
	// own order is kept; a short log is whole.
	if quiet := e.jobLogs("quiet"); len(quiet) != 1 || len(quiet[0]) != len("a warning\n{\"ok\":true}\n") ||
		!strings.Contains(quiet[0], "a warning\n") || !strings.Contains(quiet[0], "{\"ok\":true}\n") {
		t.Fatalf("quiet's logs = %q", quiet)
	}
}
