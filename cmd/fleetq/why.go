//go:build !agent

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

func init() {
	register("why", "say when a queued job is expected to start and what it waits on, or why a fleet has the size it has", runWhy)
}

var whyUsage = `usage: fleetq why [flags] JOB
       fleetq why --fleet F [flags]

  JOB         a job's status and, while it is queued, its estimated start, how the
              estimate was made, its place in line and the one thing it waits on
              (GET /api/jobs/{job_id}; a tenant's --api-key or the operator credential)
  --fleet F   why fleet F has the size it has: its capacity, the scaler's last
              decision with its reason, and what would change it (GET /api/admin/fleets;
              the operator credential)
`

func runWhy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetq why", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, whyUsage); fmt.Fprintln(stderr); fs.PrintDefaults() }
	c := operatorFlags(fs)
	fleet := fs.String("fleet", "", "explain this fleet's size instead of a job's wait")
	return finish(fs, args, stderr, "why", func() (int, error) {
		if *fleet != "" {
			if fs.NArg() != 0 {
				return 0, usageError("give a job id or --fleet, not both")
			}
			var a wire.FleetsResponse
			if err := c.get(ctx, wire.PathAdminFleets, &a); err != nil {
				return 0, err
			}
			for _, f := range a.Fleets {
				if f.FleetSlug == *fleet {
					return 0, explainFleet(stdout, f)
				}
			}
			return 0, fmt.Errorf("no fleet %q", *fleet)
		}
		id, err := oneID(fs)
		if err != nil {
			return 0, err
		}
		var j wire.Job
		if err := c.send(ctx, http.MethodGet, jobPath(wire.PathJob, id), nil, &j, false, nil); err != nil {
			return 0, err
		}
		return 0, explainJob(stdout, j, time.Now())
	})
}

// explainJob says where a job is and, while it is queued, when it is
// expected to start and what it waits on.
func explainJob(w io.Writer, j wire.Job, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s is %s", j.JobID, j.Status)
	switch j.Status {
	case "accepted":
		b.WriteString(": the dispatch function has not filed it in its fleet's queue yet, so it has no estimate\n")
	case "queued":
		fmt.Fprintf(&b, " in fleet %s\n", j.FleetSlug)
		for _, r := range estimateRows(j) {
			fmt.Fprintf(&b, "  %s: %s\n", r[0], r[1])
		}
		if at := deref(j.EstimatedStartAt); at != "" {
			if t, err := time.Parse(time.RFC3339, at); err == nil {
				fmt.Fprintf(&b, "  expected to start %s\n", inWords(t.Sub(now)))
			}
		}
	case "leased":
		fmt.Fprintf(&b, ": worker %s runs it (attempt %d of %d)\n", deref(j.WorkerID), j.Attempts, j.MaxAttempts)
	default:
		fmt.Fprintf(&b, " since %s: it waits on nothing\n", deref(j.UpdatedAt))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// estimateRows are a queued job's estimate as label and value: the
// expected start (or why there is none), place in line, what it waits on.
func estimateRows(j wire.Job) [][2]string {
	if j.EstimateBasis == "" && j.WaitingOn == nil {
		return nil
	}
	start := deref(j.EstimatedStartAt)
	if start == "" {
		start = "cannot say"
	}
	rows := [][2]string{{"estimated start", fmt.Sprintf("%s (%s)", start, j.EstimateBasis)}}
	if j.Position > 0 {
		rows = append(rows, [2]string{"place in line", fmt.Sprint(j.Position)})
	}
	if o := j.WaitingOn; o != nil {
		rows = append(rows, [2]string{"waiting on", fmt.Sprintf("%s [%s]", o.Text, o.Code)})
	}
	return rows
}

// inWords is a wait as a person says it: "now", "in about 3m20s".
func inWords(d time.Duration) string {
	if d <= time.Second {
		return "now"
	}
	return "in about " + d.Round(time.Second).String()
}

// explainFleet says why a fleet has the size it has: its capacity against
// its bounds and work, the scaler's last decision and its reason, and what
// would change it.
func explainFleet(w io.Writer, f wire.Fleet) error {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet %s: desired %d (min %d, max %d), %d in service, %s; %d queued, %d leased\n",
		f.FleetSlug, f.Desired, f.Min, f.Max, f.InService, things(f.Workers, "worker"), f.Queued, f.Leased)
	d := f.LastDecision
	if d == nil {
		b.WriteString("the scaler has not decided for it yet: its first tick sizes it to its work\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	code := d.ReasonCode
	if code == "" {
		code = "unknown"
	}
	fmt.Fprintf(&b, "last decision %s (%s): desired %d\n  %s\n", deref(d.At), code, d.Desired, d.Reason)
	for _, c := range whatWouldChange(f) {
		fmt.Fprintf(&b, "what would change it: %s\n", c)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// whatWouldChange says what would move a fleet off the size its last
// decision gave it, from the decision's counts and the fleet's bounds.
func whatWouldChange(f wire.Fleet) []string {
	d := f.LastDecision
	in := d.Inputs
	need, work := in["need"], in["ready"]+in["leased"]
	var out []string
	switch {
	case d.ReasonCode == "wake" || d.ReasonCode == "bridge":
		out = append(out, "the next tick (within a minute) sizes it to its work: it was raised on enqueue")
	case f.Max > 0 && d.Desired >= f.Max && need > f.Max:
		out = append(out, fmt.Sprintf("it is at its max %d and its work needs %d: a higher max_instances lets it grow; until then queued jobs wait for running ones to end", f.Max, need))
	case work > 0 && need > d.Desired:
		out = append(out, fmt.Sprintf("its work needs %d: it grows at the next tick", need))
	case work > 0 && need < d.Desired:
		out = append(out, fmt.Sprintf("its work needs %d of its %s: the idle ones beyond are terminated once idle past the scale-in grace, unless new work takes them", need, things(d.Desired, "instance")))
	case work > 0 && d.Desired == 1:
		out = append(out, "its work needs its 1 instance: it grows when its ready and leased jobs need more, and shrinks when they need none")
	case work > 0:
		out = append(out, fmt.Sprintf("its work needs all %d instances: it grows when its ready and leased jobs need more, and shrinks when they need fewer", d.Desired))
	case d.Desired > f.Min:
		out = append(out, fmt.Sprintf("it has no work: once its idle window passes it shrinks to its min %d; a new job keeps it", f.Min))
	default:
		out = append(out, fmt.Sprintf("it has no work and is at its min %d: a new job grows it (from zero, on enqueue)", f.Min))
	}
	if n := in["cap_held"]; n > 0 {
		out = append(out, agree(n, "1 ready job is held by its tenant's max_leased cap and not sized for: it counts once its tenant's running jobs end",
			"%d ready jobs are held by their tenants' max_leased caps and not sized for: they count once their tenants' running jobs end"))
	}
	if n := in["delayed"]; n > 0 {
		out = append(out, agree(n, "1 job waits out a retry backoff and counts once it passes", "%d jobs wait out a retry backoff and count once it passes"))
	}
	if n := in["booting"]; n > 0 {
		out = append(out, agree(n, "1 instance is booting and takes work once registered", "%d instances are booting and take work once registered"))
	}
	if n := in["unhealthy"] + in["unresponsive"]; n > 0 {
		out = append(out, agree(n, "1 instance never registered or stopped answering and is replaced", "%d instances never registered or stopped answering and are replaced"))
	}
	return out
}

// things is n things in words: "1 instance", "2 instances".
func things(n int, thing string) string {
	return agree(n, "1 "+thing, "%d "+thing+"s")
}

// agree is the sentence for one, or the one for many with n in its %d.
func agree(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return fmt.Sprintf(many, n)
}
