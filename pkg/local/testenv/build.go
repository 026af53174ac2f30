package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// BuildBinary builds the main package in dir for this machine, the way
// make build builds what ships (static, -trimpath), as name in a temporary
// directory, and answers the binary's path. make test compiles go vet and
// the CDK app's tests in the same configuration, so the build reuses their
// compiles and only links.
func BuildBinary(tb testing.TB, dir, name string) string {
	tb.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	out := filepath.Join(tb.TempDir(), name)
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", dir, err, b)
	}
	return out
}
