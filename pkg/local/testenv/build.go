package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// BuildBinary builds the main package in dir for this machine, as name in a
// temporary directory, and answers the binary's path. It builds in the test's
// own configuration (the race detector when the test has it, GOFLAGS and
// CGO_ENABLED from the environment, as make test sets them), so the build
// reuses the compiles of go vet and the tests and only links. What ships is
// built by make build (static, arm64 for the functions); what a test runs of
// the binary (its start-up, its commands) does not depend on either.
func BuildBinary(tb testing.TB, dir, name string) string {
	tb.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	out := filepath.Join(tb.TempDir(), name)
	args := []string{"build", "-o", out}
	if Race {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, ".")...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", dir, err, b)
	}
	return out
}
