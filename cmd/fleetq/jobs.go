//go:build !agent

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

func init() {
	register("jobs", "submit a job, see its status and result, wait for it, cancel or retry it, list jobs", runJobs)
}

// Exit codes of fleetq jobs: 0 done (for wait: the job succeeded), 1 an
// error or a wait that timed out, 2 bad usage, 3 (wait) the job finished
// dead or canceled.
const exitJobFailed = 3

var jobsUsage = `usage: fleetq jobs <submit|get|wait|cancel|retry|list|logs> [flags] [job id]

  submit [--tenant T] --workflow W [--input JSON] [--job-id ID] [--priority N] [--callback-url URL]
         queue a job (POST /api/jobs); prints its id, <tenant>:<job id>. Resubmitting
         with the same --job-id yields one job. --callback-url receives its outcomes, signed.
  get ID     the job's status (accepted until dispatch files it, then queued, leased,
             succeeded, dead or canceled), attempts, result and last error, and while queued
             its estimated start, place in line and what it waits on (GET /api/jobs/{job_id})
  wait ID    poll until the job succeeded, is dead or canceled (--timeout, --interval);
             exit 0 when it succeeded, 3 when dead or canceled, 1 on timeout
  cancel ID  cancel an accepted, queued or leased job (POST /api/jobs/{job_id}/cancel)
  retry ID   queue a dead job again (POST /api/admin/jobs/{job_id}/retry)
  list       jobs of a status (GET /api/admin/jobs: --status, default dead; --fleet; --limit)
  logs ID    print the tail of an attempt's runner output (GET /api/jobs/{job_id}/logs):
             the latest attempt, --attempt N, or --all

Every subcommand takes --api and --operator-token (or SigV4 with the AWS credentials),
or --api-key (a tenant's key: submit, get, wait, cancel, logs of its own jobs), and --json
to print the API's JSON answer instead of a table.
`

func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, jobsUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("fleetq jobs "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, jobsUsage); fmt.Fprintln(stderr); fs.PrintDefaults() }
	c := operatorFlags(fs)
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	var run func() error
	switch sub {
	case "submit":
		var req wire.SubmitRequest
		var input string
		fs.StringVar(&req.TenantID, "tenant", "", "tenant id (required with the operator credential; an API key's tenant otherwise)")
		fs.StringVar(&req.WorkflowID, "workflow", "", "workflow id (required)")
		fs.StringVar(&req.JobID, "job-id", "", "job id (default: the API assigns one); resubmitting with it yields one job")
		fs.IntVar(&req.Priority, "priority", 0, "priority, -1000..1000")
		fs.StringVar(&input, "input", "", "the job's input, a JSON object")
		fs.StringVar(&req.CallbackURL, "callback-url", "", "POST the job's outcomes here, signed (its host must be among the stage's webhooks.allowed_hosts)")
		run = func() error {
			if input != "" {
				req.Input = json.RawMessage(input)
				if !json.Valid(req.Input) {
					return errors.New("--input is not JSON")
				}
			}
			var a wire.JobStatusResponse
			if err := c.send(ctx, http.MethodPost, wire.PathJobs, req, &a, *asJSON, stdout); err != nil || *asJSON {
				return err
			}
			fmt.Fprintln(stdout, a.JobID)
			return nil
		}
	case "get", "cancel", "retry":
		run = func() error {
			id, err := oneID(fs)
			if err != nil {
				return err
			}
			if sub == "retry" {
				var a wire.JobStatusResponse
				if err := c.send(ctx, http.MethodPost, jobPath(wire.PathAdminJobRetry, id), wire.Empty{}, &a, *asJSON, stdout); err != nil || *asJSON {
					return err
				}
				fmt.Fprintf(stdout, "%s  %s\n", a.JobID, a.Status)
				return nil
			}
			if sub == "cancel" {
				var a wire.StatusResponse
				if err := c.send(ctx, http.MethodPost, jobPath(wire.PathJobCancel, id), wire.Empty{}, &a, *asJSON, stdout); err != nil || *asJSON {
					return err
				}
				fmt.Fprintf(stdout, "%s  %s\n", id, a.Status)
				return nil
			}
			var j wire.Job
			if err := c.send(ctx, http.MethodGet, jobPath(wire.PathJob, id), nil, &j, *asJSON, stdout); err != nil || *asJSON {
				return err
			}
			return printJob(stdout, j)
		}
	case "wait":
		timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long (exit 1)")
		interval := fs.Duration("interval", 2*time.Second, "time between two looks at the job when the API cannot hold a wait (an API without the wait route)")
		var code int
		run = func() error {
			id, err := oneID(fs)
			if err != nil {
				return err
			}
			j, err := c.wait(ctx, id, *timeout, *interval)
			if err != nil {
				return err
			}
			if j.Status != "succeeded" {
				code = exitJobFailed
			}
			if *asJSON {
				return json.NewEncoder(stdout).Encode(j)
			}
			return printJob(stdout, j)
		}
		return finish(fs, args, stderr, "jobs "+sub, func() (int, error) { err := run(); return code, err })
	case "list":
		fleet := fs.String("fleet", "", "only this fleet's jobs")
		status := fs.String("status", "dead", "accepted, queued, leased, succeeded, dead or canceled")
		limit := fs.Int("limit", 100, "at most this many (1-1000)")
		run = func() error {
			q := url.Values{"status": {*status}, "limit": {fmt.Sprint(*limit)}}
			if *fleet != "" {
				q.Set("fleet", *fleet)
			}
			var a wire.JobsResponse
			if err := c.send(ctx, http.MethodGet, wire.PathAdminJobs+"?"+q.Encode(), nil, &a, *asJSON, stdout); err != nil || *asJSON {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tSTATUS\tFLEET\tWORKFLOW\tTENANT\tATTEMPTS\tUPDATED\tREASON")
			for _, j := range a.Jobs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", j.JobID, j.Status, j.FleetSlug, j.WorkflowID, j.TenantID, j.Attempts, deref(j.UpdatedAt), j.Reason)
			}
			return tw.Flush()
		}
	case "logs":
		attempt := fs.Int("attempt", 0, "this attempt's log (default: the latest)")
		all := fs.Bool("all", false, "every attempt's log, each after a header line")
		run = func() error {
			id, err := oneID(fs)
			if err != nil {
				return err
			}
			var a wire.JobLogsResponse
			if err := c.send(ctx, http.MethodGet, jobPath(wire.PathJobLogs, id), nil, &a, *asJSON, stdout); err != nil || *asJSON {
				return err
			}
			return c.printLogs(ctx, stdout, a, *attempt, *all)
		}
	default:
		fmt.Fprintf(stderr, "fleetq jobs: unknown subcommand %q\n\n%s", sub, jobsUsage)
		return 2
	}
	return finish(fs, args, stderr, "jobs "+sub, func() (int, error) { return 0, run() })
}

// finish parses the flags and runs the subcommand; cmd names it in
// messages ("jobs get").
func finish(fs *flag.FlagSet, args []string, stderr io.Writer, cmd string, run func() (int, error)) int {
	if err := fs.Parse(args); err != nil {
		return 2
	}
	code, err := run()
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "fleetq %s: %v\n", cmd, err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "fleetq %s: %v\n", cmd, err)
		return 1
	}
	return code
}

type usageError string

func (e usageError) Error() string { return string(e) }

func oneID(fs *flag.FlagSet) (string, error) {
	if fs.NArg() != 1 {
		return "", usageError("give exactly one job id (flags go before it)")
	}
	return fs.Arg(0), nil
}

// jobPath fills a path's {job_id} with the escaped id.
func jobPath(pattern, id string) string {
	return strings.Replace(pattern, "{job_id}", url.PathEscape(id), 1)
}

// send calls the API with an optional JSON body and decodes a 2xx answer
// into out, or, with raw, copies it to w. An error answer becomes an error
// wrapping its *wire.Error.
func (c *operatorClient) send(ctx context.Context, method, path string, body, out any, raw bool, w io.Writer) error {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.api, "/")+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := c.authorize(ctx, req, data); err != nil {
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %w", method, path, wire.ReadError(res))
	}
	answer, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return err
	}
	if raw {
		_, err := fmt.Fprintln(w, strings.TrimSpace(string(answer)))
		return err
	}
	return json.Unmarshal(answer, out)
}

// printLogs copies the chosen attempts' logs from their presigned URLs.
func (c *operatorClient) printLogs(ctx context.Context, w io.Writer, a wire.JobLogsResponse, attempt int, all bool) error {
	if len(a.Logs) == 0 {
		return fmt.Errorf("job %s has not run yet: no attempt, no log", a.JobID)
	}
	chosen := a.Logs[len(a.Logs)-1:]
	switch {
	case all:
		chosen = a.Logs
	case attempt > 0:
		chosen = nil
		for _, l := range a.Logs {
			if l.Attempt == attempt {
				chosen = append(chosen, l)
			}
		}
		if len(chosen) == 0 {
			return usageError(fmt.Sprintf("job %s has attempts 1 to %d; no attempt %d", a.JobID, len(a.Logs), attempt))
		}
	}
	for _, l := range chosen {
		if all {
			fmt.Fprintf(w, "==> attempt %d <==\n", l.Attempt)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.URL, nil)
		if err != nil {
			return err
		}
		res, err := c.http.Do(req)
		if err != nil {
			return err
		}
		if res.StatusCode == http.StatusNotFound {
			res.Body.Close()
			if all {
				fmt.Fprintln(w, "(no log: its worker uploaded none)")
				continue
			}
			return fmt.Errorf("attempt %d of job %s has no log: its worker uploaded none (it may still be running, or was lost)", l.Attempt, a.JobID)
		}
		if res.StatusCode/100 != 2 {
			res.Body.Close()
			return fmt.Errorf("GET the log of attempt %d: %s", l.Attempt, res.Status)
		}
		_, err = io.Copy(w, res.Body)
		res.Body.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// finished says whether a job's status is final.
func finished(status string) bool {
	return status == "succeeded" || status == "dead" || status == "canceled"
}

// wait returns the job once its status is final. It holds a request on
// the API's wait route (GET /api/jobs/{job_id}/wait) from the status it
// last saw, up to 25 s at a time, and falls back to looking at the job
// every interval when the API answers that route 404 (an API from before
// it) or when less than a second of the timeout is left; after a 429 or
// a 5xx of that route (the waits are at their cap: API Gateway answers a
// throttled function with a 500 of its own) it looks once after interval,
// then waits again. A job submitted through the API is found at
// once (accepted until dispatch files it); one sent straight to the
// submission queue is not found until dispatch creates it.
func (c *operatorClient) wait(ctx context.Context, id string, timeout, interval time.Duration) (wire.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	long := true       // the API serves the wait route, until it answers 404
	throttled := false // the wait route answered 429 or 5xx: look once, then wait again
	var j wire.Job
	for {
		path, held := jobPath(wire.PathJob, id), false
		if secs := min(int(time.Until(deadline)/time.Second), wire.MaxWaitSeconds); long && !throttled && j.Status != "" && secs >= 1 {
			path, held = jobPath(wire.PathJobWait, id)+"?"+url.Values{"status": {j.Status}, "seconds": {fmt.Sprint(secs)}}.Encode(), true
		}
		var got wire.Job
		err := c.send(ctx, http.MethodGet, path, nil, &got, false, nil)
		var we *wire.Error
		throttled = held && errors.As(err, &we) && (we.Status == http.StatusTooManyRequests || we.Status >= 500)
		switch {
		case err == nil && finished(got.Status):
			return got, nil
		case err == nil:
			j = got
			if held {
				continue // the wait answered a change, or its end: wait again
			}
		case ctx.Err() != nil:
		case held && errors.As(err, &we) && we.Status == http.StatusNotFound:
			long = false // the job exists (it was read): the route does not
			continue
		case throttled:
		case errors.As(err, &we) && we.Code == wire.CodeNotFound && !held:
		default:
			return wire.Job{}, err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return wire.Job{}, fmt.Errorf("job %s did not finish within %s (last status %q)", id, timeout, j.Status)
			}
			return wire.Job{}, ctx.Err()
		case <-time.After(interval):
		}
	}
}

func printJob(w io.Writer, j wire.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("job", j.JobID)
	row("status", j.Status)
	row("reason", j.Reason)
	row("tenant", j.TenantID)
	row("workflow", j.WorkflowID)
	row("fleet", j.FleetSlug)
	row("attempts", fmt.Sprintf("%d of %d (preemptions %d)", j.Attempts, j.MaxAttempts, j.Preemptions))
	row("created", deref(j.CreatedAt))
	row("updated", deref(j.UpdatedAt))
	row("not before", deref(j.NotBefore))
	if j.WorkerID != nil {
		row("worker", *j.WorkerID)
		row("lease expires", deref(j.LeaseExpiresAt))
	}
	if j.Progress != nil {
		row("progress", fmt.Sprintf("%.0f%%", *j.Progress*100))
	}
	for _, r := range estimateRows(j) {
		row(r[0], r[1])
	}
	if len(j.Result) > 0 && string(j.Result) != "null" {
		row("result", string(j.Result))
	}
	if j.Error != nil {
		e := j.Error.Message
		if j.Error.Code != "" {
			e = j.Error.Code + ": " + e
		}
		row("error", fmt.Sprintf("%s (retryable %v)", e, j.Error.Retryable))
	}
	return tw.Flush()
}
