//go:build !agent

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

func init() {
	register("costs", "what finished jobs cost, by tenant, fleet and workflow", runCosts)
}

func runCosts(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetq costs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := operatorFlags(fs)
	since := fs.String("since", "24h", "how far back, a duration (24h, 90m, 168h); rounded down to the hour")
	by := fs.String("by", "tenant,fleet,workflow", "what to group by: any of tenant, fleet, workflow, comma-separated")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fleetq costs [--since 24h] [--by tenant,fleet,workflow] [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Prints GET /api/admin/costs: the cost of the jobs that finished in the window, priced from")
		fmt.Fprintln(stderr, "their instance's type, zone and purchase option: Spot at the zone's current Spot price from")
		fmt.Fprintln(stderr, "EC2 (else the config's), On-Demand at the stage's configured prices (docs/scaling.md).")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	keys, err := costKeys(*by)
	if err != nil {
		fmt.Fprintln(stderr, "fleetq costs:", err)
		return 2
	}
	path := wire.PathAdminCosts + "?since=" + url.QueryEscape(*since)
	if *asJSON {
		var raw json.RawMessage
		if err := c.get(ctx, path, &raw); err != nil {
			fmt.Fprintln(stderr, "fleetq costs:", err)
			return 1
		}
		fmt.Fprintln(stdout, string(raw))
		return 0
	}
	var a wire.CostsResponse
	if err := c.get(ctx, path, &a); err != nil {
		fmt.Fprintln(stderr, "fleetq costs:", err)
		return 1
	}
	if err := printCosts(stdout, a, keys); err != nil {
		return 1
	}
	return 0
}

var costColumns = map[string]func(wire.CostGroup) string{
	"tenant":   func(g wire.CostGroup) string { return g.TenantID },
	"fleet":    func(g wire.CostGroup) string { return g.FleetSlug },
	"workflow": func(g wire.CostGroup) string { return g.WorkflowID },
}

func costKeys(by string) ([]string, error) {
	var keys []string
	for _, k := range strings.Split(by, ",") {
		k = strings.TrimSpace(k)
		if _, ok := costColumns[k]; !ok {
			return nil, fmt.Errorf("--by %q: group by tenant, fleet or workflow", k)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// printCosts sums the API's groups by the chosen columns and prints them,
// most expensive first, with the total.
func printCosts(w io.Writer, a wire.CostsResponse, keys []string) error {
	type row struct {
		cols           []string
		jobs, unpriced int
		usd            float64
	}
	rows := map[string]*row{}
	for _, g := range a.Groups {
		cols := make([]string, len(keys))
		for i, k := range keys {
			cols[i] = costColumns[k](g)
		}
		id := strings.Join(cols, "\x00")
		r := rows[id]
		if r == nil {
			r = &row{cols: cols}
			rows[id] = r
		}
		r.jobs += g.Jobs
		r.unpriced += g.Unpriced
		r.usd += g.CostUSD
	}
	out := make([]*row, 0, len(rows))
	for _, r := range rows {
		out = append(out, r)
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].usd != out[k].usd {
			return out[i].usd > out[k].usd
		}
		return strings.Join(out[i].cols, "\x00") < strings.Join(out[k].cols, "\x00")
	})
	fmt.Fprintf(w, "jobs finished since %s\n", a.Since.UTC().Format("2006-01-02 15:04 UTC"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(keys, "\t"))+"\tJOBS\tUNPRICED\tCOST USD")
	jobs, unpriced := 0, 0
	for _, r := range out {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\n", strings.Join(r.cols, "\t"), r.jobs, r.unpriced, r.usd)
		jobs += r.jobs
		unpriced += r.unpriced
	}
	fmt.Fprintf(tw, "TOTAL%s\t%d\t%d\t%.4f\n", strings.Repeat("\t", len(keys)-1), jobs, unpriced, a.TotalUSD)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range a.PoolVolumes {
		fmt.Fprintf(w, "fleet %s: Spot pool volumes, %d × %d GB: $%.4f since then, $%.4f a day (not in TOTAL)\n", p.FleetSlug, p.Instances, p.VolumeGB, p.USD, p.USDPerDay)
	}
	return nil
}
