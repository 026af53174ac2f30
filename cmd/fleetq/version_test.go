package main

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/fleetq/fleetq/pkg/lib/version"
)

func TestVersionPrintsTheStampedVersion(t *testing.T) {
	t.Parallel()
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "v1.2.3-4-gabcdef"
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if want := "fleetq v1.2.3-4-gabcdef " + runtime.GOOS + "/" + runtime.GOARCH + "\n"; out.String() != want {
		t.Fatalf("output %q, want %q", out.String(), want)
	}
	if code := runCLI(t.Context(), []string{"version", "extra"}, &out, &errOut); code != 2 {
		t.Fatalf("extra argument: exit %d", code)
	}
}
