package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// DemoOptions configure RunDemo.
type DemoOptions struct {
	// Workflow is submitted Jobs times (default demo-sleep, Jobs 16), each
	// sleeping between MinSeconds and MaxSeconds (default 5 and 25).
	Workflow               string
	Jobs                   int
	MinSeconds, MaxSeconds int
	Out                    io.Writer
	// Live redraws the table in place (a terminal); otherwise a plain line
	// is printed whenever a number changes.
	Live     bool
	Interval time.Duration // default 1s
	Timeout  time.Duration // default 5m
	Seed     uint64
	// Clock paces the table and the timeout and measures the times (default:
	// the wall clock; pass the stack's clock).
	Clock clock.Clock
}

// DemoSummary is what the demo measured.
type DemoSummary struct {
	Jobs, Succeeded int
	// Lost are jobs that did not succeed by the end (must be 0).
	Lost int
	// KilledBusy are instances the scaler terminated while their worker ran
	// a job (must be 0).
	KilledBusy int
	// FirstLease is the time from the first submission to the first lease.
	FirstLease    time.Duration
	PeakInstances int
	Elapsed       time.Duration
}

// RunDemo submits a burst of jobs to an idle stack through its HTTP API,
// shows the fleet scaling while they run, and returns once every job has
// finished and the fleet is back to zero (or at the timeout).
func (s *Stack) RunDemo(ctx context.Context, o DemoOptions) (DemoSummary, error) {
	if o.Workflow == "" {
		o.Workflow = "demo-sleep"
	}
	if o.Jobs <= 0 {
		o.Jobs = 16
	}
	if o.MinSeconds <= 0 {
		o.MinSeconds = 5
	}
	if o.MaxSeconds < o.MinSeconds {
		o.MaxSeconds = max(25, o.MinSeconds)
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if s.Fleet == nil {
		return DemoSummary{}, fmt.Errorf("the demo needs the local fleet")
	}
	fleet := ""
	for _, f := range s.Config.Fleets {
		for _, w := range f.Workflows {
			if w == o.Workflow {
				fleet = f.Slug
			}
		}
	}
	if fleet == "" {
		return DemoSummary{}, fmt.Errorf("no fleet serves workflow %q", o.Workflow)
	}

	rng := rand.New(rand.NewPCG(o.Seed, 0xde30))
	start := o.Clock.Now()
	ids := make([]string, o.Jobs)
	for i := range ids {
		ids[i] = tenant.JobID("demo", fmt.Sprintf("demo-%d-%02d", start.Unix(), i))
		secs := o.MinSeconds + rng.IntN(o.MaxSeconds-o.MinSeconds+1)
		body := map[string]any{"job_id": ids[i], "tenant_id": "demo", "workflow_id": o.Workflow, "input": map[string]any{"seconds": secs}}
		if err := s.submit(ctx, body); err != nil {
			return DemoSummary{}, err
		}
	}
	fmt.Fprintf(o.Out, "submitted %d %s jobs to fleet %s (%d–%d s each)\n\n", o.Jobs, o.Workflow, fleet, o.MinSeconds, o.MaxSeconds)

	header := fmt.Sprintf("%8s  %-8s %7s %7s %8s %11s  %s", "elapsed", "fleet", "queued", "leased", "desired", "in service", "done")
	fmt.Fprintln(o.Out, header)
	var sum DemoSummary
	sum.Jobs = o.Jobs
	last := ""
	deadline := o.Clock.After(o.Timeout)
	tick := o.Clock.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		done, terminal, firstLease, err := s.demoJobs(ctx, ids)
		if err != nil {
			return sum, err
		}
		if !firstLease.IsZero() && sum.FirstLease == 0 {
			sum.FirstLease = firstLease.Sub(start).Round(100 * time.Millisecond)
		}
		b, err := s.Store.CountBacklog(ctx, fleet)
		if err != nil {
			return sum, err
		}
		g, err := s.Fleet.Describe(ctx, fleet)
		if err != nil {
			return sum, err
		}
		row := fmt.Sprintf("%-8s %7d %7d %8d %11d  %d/%d", fleet, b.Queued(), b.Leased, g.Desired, g.InService(), done, o.Jobs)
		elapsed := o.Clock.Now().Sub(start).Round(time.Second)
		switch {
		case o.Live:
			fmt.Fprintf(o.Out, "\r\x1b[K%8s  %s", elapsed, row)
		case row != last:
			fmt.Fprintf(o.Out, "%8s  %s\n", elapsed, row)
		}
		last = row
		sum.Succeeded = done
		if terminal == o.Jobs && g.Desired == 0 && len(g.Instances) == 0 {
			// The group empties before the tick that emptied it records
			// its decision: the demo ends once the record says 0 too.
			st, err := s.Store.GetFleetState(ctx, fleet)
			if err != nil {
				return sum, err
			}
			if st.Desired == 0 && st.LastDecision != nil && st.LastDecision.Desired == 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return sum, ctx.Err()
		case <-deadline:
			fmt.Fprintln(o.Out)
			return s.finishDemo(sum, fleet, o.Clock.Now().Sub(start)), fmt.Errorf("the demo did not finish within %s", o.Timeout)
		case <-tick.Chan():
		}
	}
	if o.Live {
		fmt.Fprintln(o.Out)
	}
	return s.finishDemo(sum, fleet, o.Clock.Now().Sub(start)), nil
}

func (s *Stack) finishDemo(sum DemoSummary, fleet string, elapsed time.Duration) DemoSummary {
	st := s.Fleet.Stats()
	sum.Lost = sum.Jobs - sum.Succeeded
	sum.KilledBusy = st.KilledBusy
	sum.PeakInstances = st.Peak[fleet]
	sum.Elapsed = elapsed.Round(time.Second)
	return sum
}

// demoJobs counts the demo's succeeded and finished jobs and finds its
// first lease.
func (s *Stack) demoJobs(ctx context.Context, ids []string) (succeeded, terminal int, firstLease time.Time, err error) {
	for _, id := range ids {
		j, err := s.Store.GetJob(ctx, id)
		if err != nil {
			continue // not dispatched yet
		}
		if j.Status == job.Succeeded {
			succeeded++
		}
		if j.Status.Terminal() {
			terminal++
		}
		if f := j.FirstLeasedAt; !f.IsZero() && (firstLease.IsZero() || f.Before(firstLease)) {
			firstLease = f
		}
	}
	return succeeded, terminal, firstLease, nil
}

// submit posts one job to the stack's producer route.
func (s *Stack) submit(ctx context.Context, body map[string]any) error {
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/jobs", bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.OperatorToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusAccepted && res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return fmt.Errorf("submit: %s: %s", res.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// String is the summary as the demo prints it.
func (d DemoSummary) String() string {
	return fmt.Sprintf("jobs %d, done %d, lost %d, busy workers killed %d, first submit to first lease %s, peak instances %d, elapsed %s",
		d.Jobs, d.Succeeded, d.Lost, d.KilledBusy, d.FirstLease, d.PeakInstances, d.Elapsed)
}
