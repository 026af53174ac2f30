package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
)

func init() {
	register("fleets", "show each fleet's backlog, capacity and last scaling decision", runFleets)
}

type fleetsAnswer struct {
	Fleets []struct {
		Slug      string `json:"fleet_slug"`
		Queued    int    `json:"queued"`
		Leased    int    `json:"leased"`
		Desired   int    `json:"desired"`
		InService int    `json:"in_service"`
		Workers   int    `json:"workers"`
		Min       int    `json:"min"`
		Max       int    `json:"max"`
		Last      *struct {
			At      string   `json:"at"`
			Reason  string   `json:"reason"`
			Victims []string `json:"victims"`
		} `json:"last_decision"`
		History []struct {
			At      string `json:"at"`
			Desired int    `json:"desired"`
			Reason  string `json:"reason"`
		} `json:"history"`
	} `json:"fleets"`
}

func runFleets(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetq fleets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := operatorFlags(fs)
	history := fs.Bool("history", false, "also print each fleet's recent decisions, newest first")
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
	path := "/api/admin/fleets"
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
	var a fleetsAnswer
	if err := c.get(ctx, path, &a); err != nil {
		fmt.Fprintln(stderr, "fleetq fleets:", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLEET\tQUEUED\tLEASED\tDESIRED\tIN SERVICE\tWORKERS\tMIN-MAX\tLAST DECISION")
	for _, f := range a.Fleets {
		last := "-"
		if f.Last != nil {
			last = f.Last.At + "  " + f.Last.Reason
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d-%d\t%s\n", f.Slug, f.Queued, f.Leased, f.Desired, f.InService, f.Workers, f.Min, f.Max, last)
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	if *history {
		for _, f := range a.Fleets {
			fmt.Fprintf(stdout, "\n%s\n", f.Slug)
			for _, d := range f.History {
				fmt.Fprintf(stdout, "  %s  desired %d  %s\n", d.At, d.Desired, d.Reason)
			}
		}
	}
	return 0
}
