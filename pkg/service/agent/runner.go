package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// Runner runs jobs on this machine: a command (exec), ComfyUI (comfyui), or
// a timed sleep (sleep, for demos and the dev stack's local fleet).
type Runner interface {
	// Ready answers nil once the runner can take jobs (the agent registers
	// only then).
	Ready(ctx context.Context) error
	// Run runs one job until it ends or ctx is canceled (the job was
	// canceled, its lease lost, or the machine is going away). A *JobError
	// says whether a failure is worth retrying; any other error is retried.
	Run(ctx context.Context, j *Job) (json.RawMessage, error)
}

// Job is a leased job handed to a runner.
type Job struct {
	Lease
	// Progress reports progress (0..1); the next heartbeat carries it.
	Progress func(float64)
	// HTTP fetches inputs and stores outputs through the presigned URLs.
	HTTP *http.Client
	// Clock is the agent's clock; runners that wait (a sleep, a poll of
	// their engine) wait on it (nil: the wall clock).
	Clock clock.Clock
	// Log receives the runner's output (a command's stdout and stderr);
	// the agent keeps its tail and uploads it as the attempt's log.
	Log io.Writer

	// outputs, when set, answers the freshest output URLs (see Outputs).
	outputs func() (string, map[string]string)
}

// clock answers the clock the job's waits run on.
func (j *Job) clock() clock.Clock {
	if j.Clock == nil {
		return clock.Real{}
	}
	return j.Clock
}

// Outputs answers the output URLs to upload to now. Presigned URLs expire
// with the lease (plus a grace), so for a job that runs longer the agent
// fetches fresh ones with its heartbeats; runners upload with these, not
// with the lease's original URLs.
func (j *Job) Outputs() (url string, named map[string]string) {
	if j.outputs != nil {
		return j.outputs()
	}
	return j.OutputURL, j.OutputURLs
}

// JobError is a job's failure as the runner judges it.
type JobError struct {
	Message   string
	Code      string
	Retryable bool
}

func (e *JobError) Error() string { return e.Message }

// Permanent is a failure that no retry will fix.
func Permanent(code ErrorCode, format string, args ...any) *JobError {
	return &JobError{Code: string(code), Message: fmt.Sprintf(format, args...)}
}

// Retryable is a failure another attempt may not meet.
func Retryable(code ErrorCode, format string, args ...any) *JobError {
	return &JobError{Code: string(code), Message: fmt.Sprintf(format, args...), Retryable: true}
}

// SleepRunner sleeps input.seconds (on the job's clock) and succeeds;
// input.fail (a message) fails it permanently instead.
type SleepRunner struct{}

func (SleepRunner) Ready(context.Context) error { return nil }

func (SleepRunner) Run(ctx context.Context, j *Job) (json.RawMessage, error) {
	var in struct {
		Seconds float64 `json:"seconds"`
		Fail    string  `json:"fail"`
	}
	if len(j.Input) > 0 {
		if err := json.Unmarshal(j.Input, &in); err != nil {
			return nil, Permanent(CodeBadInput, "sleep: input must be {\"seconds\": N}: %v", err)
		}
	}
	if in.Seconds < 0 || in.Seconds > 24*3600 {
		return nil, Permanent(CodeBadInput, "sleep: seconds must be between 0 and 86400, got %v", in.Seconds)
	}
	fmt.Fprintf(j.logWriter(), "sleep: job %s attempt %d sleeps %gs\n", j.JobID, j.Attempt, in.Seconds)
	t := j.clock().NewTimer(time.Duration(in.Seconds * float64(time.Second)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.Chan():
	}
	if in.Fail != "" {
		return nil, Permanent(CodeRequested, "%s", in.Fail)
	}
	return json.Marshal(map[string]any{"slept_seconds": in.Seconds})
}

// fetchInputs downloads each named input to dir/<name> and answers the
// local paths by name. A failed download is retryable (the URL or the
// network may be back next attempt).
func fetchInputs(ctx context.Context, hc *http.Client, urls map[string]string, dir string) (map[string]string, error) {
	paths := map[string]string{}
	for _, name := range sortedKeys(urls) {
		if name != filepath.Base(name) || name == "." || name == ".." {
			return nil, Permanent(CodeBadInput, "input name %q is not a plain file name", name)
		}
		p := filepath.Join(dir, name)
		if err := download(ctx, hc, urls[name], p); err != nil {
			return nil, Retryable(CodeInputDownload, "download input %q: %v", name, err)
		}
		paths[name] = p
	}
	return paths, nil
}

func download(ctx context.Context, hc *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := client(hc).Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET answered %s", res.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// upload PUTs a file to a presigned URL.
func upload(ctx context.Context, hc *http.Client, url, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return put(ctx, hc, url, f, st.Size())
}

func put(ctx context.Context, hc *http.Client, url string, body io.Reader, size int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	res, err := client(hc).Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("PUT answered %s", res.Status)
	}
	return nil
}

func client(hc *http.Client) *http.Client {
	if hc != nil {
		return hc
	}
	return http.DefaultClient
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// asJobError turns a runner's error into what the agent reports.
func asJobError(err error) *JobError {
	var je *JobError
	if errors.As(err, &je) {
		return je
	}
	return &JobError{Code: string(CodeRunnerError), Message: err.Error(), Retryable: true}
}
