//go:build !agent

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"runtime"
	"strings"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

func init() {
	register("console", "sign in to the operator console: print (or open) a browser URL", runConsole)
}

func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleetq console", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := operatorFlags(fs)
	open := fs.Bool("open", false, "also open the URL in the default browser (xdg-open or open)")
	everywhere := fs.Bool("sign-out-everywhere", false, "instead, end every console session of this operator, in every browser (DELETE /api/admin/console-session)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: fleetq console [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Exchanges the operator credential (the operator token, or SigV4 from the AWS credentials)")
		fmt.Fprintln(stderr, "for a signed console login (POST /api/admin/console-session) and prints its URL: open it")
		fmt.Fprintln(stderr, "within two minutes, once; the browser session then lasts an hour.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fleetq console: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *everywhere {
		var ended wire.ConsoleSessionsEnded
		if err := c.send(ctx, http.MethodDelete, wire.PathAdminConsoleSession, wire.Empty{}, &ended, false, nil); err != nil {
			fmt.Fprintln(stderr, "fleetq console:", err)
			return 1
		}
		fmt.Fprintf(stdout, "every console session of %s has ended\n", ended.Operator)
		return 0
	}
	var a wire.ConsoleSessionResponse
	if err := c.send(ctx, http.MethodPost, wire.PathAdminConsoleSession, wire.Empty{}, &a, false, nil); err != nil {
		fmt.Fprintln(stderr, "fleetq console:", err)
		return 1
	}
	u := strings.TrimRight(c.api, "/") + a.Path
	fmt.Fprintln(stdout, u)
	fmt.Fprintf(stderr, "open it once, before %s; the session then lasts an hour\n", deref(a.ExpiresAt))
	if *open {
		if err := openBrowser(ctx, u); err != nil {
			fmt.Fprintln(stderr, "fleetq console: could not open a browser:", err)
			return 1
		}
	}
	return 0
}

// openBrowser hands the URL to the desktop's opener.
func openBrowser(ctx context.Context, u string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	return exec.CommandContext(ctx, name, u).Start()
}
