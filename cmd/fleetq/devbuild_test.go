package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoRunAfterMakeDevCompilesNothing runs the commands make dev runs
// before it starts the stack (make -n dev, so the Makefile's own recipe)
// in a small module of its own whose CLI lives where fleetq's does, then
// `go run ./cmd/fleetq` as the README's reader would: go run must find
// every package, main included, compiled. A go build of bin/fleetq would
// not do: go run compiles a main package without debug information, and
// any -ldflags is recorded in the compile of main.
func TestGoRunAfterMakeDevCompilesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	for _, tool := range []string{"make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Makefile", string(mk))
	write("go.mod", "module example.com/devbuild\n\ngo 1.22\n")
	// A name of its own, so no earlier run left this main package in the cache.
	write("cmd/fleetq/main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"built in "+dir+"\") }\n")

	// The user's shell: none of make test's flags.
	env := []string{"GOFLAGS=", "CGO_ENABLED=", "GOTOOLCHAIN=local", "VERSION=v0.0.0"}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	recipe := run("make", "-n", "-s", "dev")
	var build []string
	for line := range strings.Lines(recipe) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "bin/fleetq dev") {
			break
		}
		build = append(build, line)
	}
	if len(build) == len(strings.Split(strings.TrimSpace(recipe), "\n")) {
		t.Fatalf("make dev should build bin/fleetq, then run bin/fleetq dev; it runs:\n%s", recipe)
	}
	run("sh", "-ec", strings.Join(build, "\n"))
	if out := run(filepath.Join(dir, "bin", "fleetq")); !strings.Contains(out, dir) {
		t.Fatalf("bin/fleetq is not the module's CLI: %q", out)
	}
	out := run("go", "run", "-x", "./cmd/fleetq")
	if n := strings.Count(out, "/compile "); n != 0 {
		t.Errorf("go run ./cmd/fleetq after make dev's build compiled %d package(s) again; make dev ran:\n%s", n, strings.Join(build, "\n"))
	}
}
