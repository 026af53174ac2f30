//go:build !agent

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

func init() {
	register("fleets", "show each fleet's backlog, capacity and last scaling decision", runFleets)
}

func runFleets(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetq fleets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := operatorFlags(fs)
	history := fs.Bool("history", false, "also print each fleet's recent decisions, newest first")
	boot := fs.Bool("boot", false, "also print each fleet's boot timeline: each phase from launch (or a start from the warm pool) to the first lease, its median, 95th percentile and longest, and the slowest")
	asJSON := fs.Bool("json", false, "print the API's JSON answer")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fleetq fleets [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Prints GET /api/admin/fleets: per fleet the queued and leased jobs, desired and in-service")
		fmt.Fprintln(stderr, "capacity, workers, and the scaler's last decision with its reason.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	path := wire.PathAdminFleets
	if *history {
		path += "?history=true"
	}
	if *asJSON {
		var raw json.RawMessage
		if err := c.get(ctx, path, &raw); err != nil {
			fmt.Fprintln(stderr, "fleetq fleets:", err)
			return 1
		}
		fmt.Fprintln(stdout, string(raw))
		return 0
	}
	var a wire.FleetsResponse
	if err := c.get(ctx, path, &a); err != nil {
		fmt.Fprintln(stderr, "fleetq fleets:", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLEET\tQUEUED\tLEASED\tDESIRED\tIN SERVICE\tWORKERS\tMIN-MAX\tLAST DECISION")
	for _, f := range a.Fleets {
		last := "-"
		if d := f.LastDecision; d != nil {
			last = deref(d.At) + "  " + d.Reason
		}
		workers := strconv.Itoa(f.Workers)
		if f.OutdatedAgents > 0 {
			// Still on the previous release's agent (docs/deploy.md, "Upgrading a stage").
			workers += fmt.Sprintf(" (%d older)", f.OutdatedAgents)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d-%d\t%s\n", f.FleetSlug, f.Queued, f.Leased, f.Desired, f.InService, workers, f.Min, f.Max, last)
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	if *boot {
		for _, f := range a.Fleets {
			printBoot(stdout, f)
		}
	}
	if *history {
		for _, f := range a.Fleets {
			fmt.Fprintf(stdout, "\n%s\n", f.FleetSlug)
			for _, d := range f.History {
				fmt.Fprintf(stdout, "  %s  desired %d  %s\n", deref(d.At), d.Desired, d.Reason)
			}
		}
	}
	return 0
}

// deref is a time the API may answer as null, or "".
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// printBoot prints a fleet's boot timeline (docs/scaling.md, "Cold start").
func printBoot(w io.Writer, f wire.Fleet) {
	fmt.Fprintf(w, "\n%s boot", f.FleetSlug)
	b := f.Boot
	if b == nil {
		fmt.Fprintln(w, ": no worker reported one")
		return
	}
	fmt.Fprintf(w, " over %d workers; slowest: %s\n", b.Workers, b.Slowest)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  PHASE\tWORKERS\tP50\tP95\tMAX\t")
	for _, p := range b.Phases {
		mark := ""
		if p.Name == b.Slowest {
			mark = "<- slowest"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%.1fs\t%.1fs\t%.1fs\t%s\n", p.Name, p.Workers, p.P50S, p.P95S, p.MaxS, mark)
	}
	_ = tw.Flush()
}
