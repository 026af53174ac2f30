package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/fleetq/fleetq/pkg/lib/version"
)

func init() {
	register("version", "print the build's version (the agent's and the control plane's)", runVersion)
}

// runVersion prints "fleetq <version> <os>/<arch>". The boot script of the
// stack's instances runs it to check the agent it fetched runs at all.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: fleetq version")
		return 2
	}
	fmt.Fprintf(stdout, "fleetq %s %s/%s\n", version.Get(), runtime.GOOS, runtime.GOARCH)
	return 0
}
