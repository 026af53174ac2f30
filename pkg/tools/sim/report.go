package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// Report is one workload's results, one per policy.
type Report struct {
	Workload string   `json:"workload"`
	Seed     uint64   `json:"seed"`
	Results  []Result `json:"results"`
}

// WriteTable prints the report as an aligned table.
func (r Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "workload %s (seed %d)\n", r.Workload, r.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join([]string{"policy", "jobs", "done", "killed", "spot", "p50 wait", "p95 wait", "idle→lease", "GPU-h", "busy-h", "util", "cost $", "$/job", "peak", ""}, "\t"))
	for _, x := range r.Results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%.1f\t%.1f\t%.0f%%\t%.2f\t%.3f\t%d\t\n",
			x.Policy, x.Jobs, x.Completed, x.Killed, x.SpotRequeued,
			dur(x.P50WaitS), dur(x.P95WaitS), dur(x.TTFLIdleMaxS),
			x.GPUHours, x.BusyGPUHours, 100*x.Utilization, x.CostUSD, x.CostPerJobUSD, x.PeakInstances)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range r.Results {
		if x.BridgeStarts+x.BridgeFreshLaunches > 0 {
			fmt.Fprintf(w, "%s: %d bridge starts (%d launched fresh), %.1f bridge On-Demand hours, %d of %d jobs started on a bridge, pool volumes $%.2f (in cost $)\n",
				x.Policy, x.BridgeStarts, x.BridgeFreshLaunches, x.BridgeGPUHours, x.BridgedJobs, x.Jobs, x.PoolStorageUSD)
		}
		if x.PoolStarts+x.PoolStartFailures > 0 {
			fmt.Fprintf(w, "%s: %d Spot pool starts (%d more failed for capacity, for %d jobs), %d stops, %d created, %d interrupted, %.1f pool Spot hours, %d of %d jobs started on a pool instance, pool volumes $%.2f (in cost $)\n",
				x.Policy, x.PoolStarts, x.PoolStartFailures, x.PoolFallbackJobs, x.PoolStops, x.PoolCreates, x.PoolInterruptions, x.SpotPoolGPUHours, x.PoolJobs, x.Jobs, x.SpotPoolStorageUSD)
		}
	}
	for _, x := range r.Results {
		if x.Estimates != nil {
			if err := x.Estimates.writeTable(w, x.Policy); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeTable prints a run's estimates: at submit, at later ticks, and by
// what the job waited on, each as the share within the goal.
func (es *Estimates) writeTable(w io.Writer, policy string) error {
	fmt.Fprintf(w, "%s start estimates (within max(60s, 20%% of the wait from the estimate to the lease)):\n", policy)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join([]string{"made", "estimates", "within", "share", "unknown", "waited>1m", "share", "p90 error", ""}, "\t"))
	row := func(name string, a Accuracy) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f%%\t%d\t%d\t%.0f%%\t%s\t\n", name, a.Estimates, a.Within, 100*a.Share(),
			a.Unknown, a.Waited, 100*a.WaitedShare(), dur(a.P90ErrorS))
	}
	row("at submit", es.AtSubmit)
	row("at ticks", es.AtTicks)
	codes := slices.Sorted(maps.Keys(es.ByCode))
	for _, c := range codes {
		row(string(c), *es.ByCode[c])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if es.Unresolved > 0 {
		fmt.Fprintf(w, "%d estimates of jobs not leased by the horizon are left out\n", es.Unresolved)
	}
	return nil
}

// WriteJSON prints the report for machines.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func dur(s float64) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%.0fs", s)
	case s < 3600:
		return fmt.Sprintf("%.1fm", s/60)
	default:
		return fmt.Sprintf("%.1fh", s/3600)
	}
}
