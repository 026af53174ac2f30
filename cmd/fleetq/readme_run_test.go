package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The README marks the shell blocks a test runs: an HTML comment the
// reader does not see, on the line before the fence. docs/testing.md, "The
// README's examples".
const (
	// runnableMark precedes a ```sh block the test runs.
	runnableMark = "<!-- runnable -->"
	// outputMark precedes a ```text block after a runnable block: lines its
	// commands print, in order (others may come between), spaces collapsed,
	// … standing for any text.
	outputMark = "<!-- output -->"
	// readmeURL is the dev stack's address as the README writes it; the
	// test's stack listens on a port of its own.
	readmeURL = "http://127.0.0.1:8080"
)

// readmeBlock is a runnable block of the README and the output it shows.
type readmeBlock struct {
	line   int // of its fence
	script string
	output []string
}

// readmeBlocks reads the runnable blocks of a markdown file, with the
// output block that follows each, if any.
func readmeBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []readmeBlock
	// fence answers the body of the fenced block opening at lines[i] with
	// one of the languages, and the index of the line after it.
	fence := func(i int, langs ...string) ([]string, int) {
		if i >= len(lines) {
			t.Fatalf("%s:%d: a mark with no block after it", path, i)
		}
		open := strings.TrimSpace(lines[i])
		lang, ok := strings.CutPrefix(open, "```")
		if !ok || !strings.Contains(" "+strings.Join(langs, " ")+" ", " "+lang+" ") {
			t.Fatalf("%s:%d: want a ```%s block after the mark, got %q", path, i+1, langs[0], open)
		}
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				return lines[i+1 : j], j + 1
			}
		}
		t.Fatalf("%s:%d: the block never ends", path, i+1)
		return nil, 0
	}
	for i := 0; i < len(lines); i++ {
		switch strings.TrimSpace(lines[i]) {
		case runnableMark:
			body, next := fence(i+1, "sh", "bash")
			b := readmeBlock{line: i + 2, script: strings.Join(body, "\n")}
			// An output block: after blank lines, the mark and its fence.
			j := next
			for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
				j++
			}
			if j < len(lines) && strings.TrimSpace(lines[j]) == outputMark {
				body, next = fence(j+1, "text")
				for _, l := range body {
					if l = strings.Join(strings.Fields(l), " "); l != "" {
						b.output = append(b.output, l)
					}
				}
			}
			out = append(out, b)
			i = next - 1
		case outputMark:
			t.Fatalf("%s:%d: an output block that follows no runnable block", path, i+1)
		}
	}
	return out
}

// matchOutput answers the first line of want (spaces collapsed, … for any
// text) that got does not print after the lines before it, or "".
func matchOutput(want []string, got string) string {
	lines := strings.Split(got, "\n")
	at := 0
	for _, w := range want {
		parts := strings.Split(w, "…")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		for at < len(lines) && !re.MatchString(strings.Join(strings.Fields(lines[at]), " ")) {
			at++
		}
		if at == len(lines) {
			return w
		}
		at++
	}
	return ""
}

// readmeServeArgs answers the ARGS of the README's `make serve
// ARGS="..."` line, and checks that the Makefile's serve target builds
// bin/fleetq and runs `bin/fleetq dev $(ARGS)`, which the test then runs.
func readmeServeArgs(t *testing.T, readme string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^ {4}make serve ARGS="([^"]*)"\s*$`).FindAllStringSubmatch(readme, -1)
	if len(m) != 1 {
		t.Fatalf("README.md should show one indented `make serve ARGS=\"...\"` line that starts the stack its examples use; found %d", len(m))
	}
	mk := readTree(t).make.targets["serve"]
	if !strings.Contains(mk, "-o bin/fleetq ./cmd/fleetq") && !strings.Contains(mk, "$(DEV_CLI)") || !strings.Contains(mk, "bin/fleetq dev $(ARGS)") {
		t.Fatalf("the Makefile's serve target should build bin/fleetq and run bin/fleetq dev $(ARGS), as the README's examples assume:\n%s", mk)
	}
	return strings.Fields(m[0][1])
}

// syncBuffer collects a process's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe starts `fleetq dev` with the README's ARGS on a port of its
// own, as `make serve` does, and answers its URL once its banner is out.
// The banner must say that its state is in memory.
func startServe(ctx context.Context, t *testing.T, bin string, args []string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append(append([]string{"dev"}, args...), "--addr", "127.0.0.1:0")...)
	var logs syncBuffer
	cmd.Stderr = &logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	banner := make(chan string)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		var seen []string
		for sc.Scan() {
			seen = append(seen, sc.Text())
			if strings.HasPrefix(sc.Text(), "state: ") {
				banner <- strings.Join(seen, "\n")
			}
		}
		close(banner)
		_ = cmd.Wait()
	}()
	b, ok := <-banner
	if !ok {
		t.Fatalf("fleetq dev %s ended before its banner:\n%s", strings.Join(args, " "), logs.String())
	}
	t.Logf("fleetq dev %s:\n%s", strings.Join(args, " "), b)
	if !strings.Contains(b, "state: in memory") || !strings.Contains(b, "lost when fleetq dev stops") {
		t.Errorf("the dev stack's banner does not say that its state is in memory and lost when it stops:\n%s", b)
	}
	m := regexp.MustCompile(`fleetq dev ready at (http://\S+)`).FindStringSubmatch(b)
	if m == nil {
		t.Fatalf("no URL in the banner:\n%s", b)
	}
	return m[1]
}

// TestReadmeRunsAsWritten runs every block README.md marks runnable, in
// order, in one bash (variables and background jobs carry from block to
// block), in a directory whose bin/fleetq is the CLI built once, against
// the dev stack its `make serve ARGS="..."` line starts: fleetq dev with
// those flags, on a port of its own (the README's 127.0.0.1:8080 replaced
// by it). Each block must exit 0 and print the lines of the output block
// after it.
func TestReadmeRunsAsWritten(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, "../../README.md")
	if len(blocks) == 0 {
		t.Fatal("README.md marks no block runnable")
	}
	args := readmeServeArgs(t, string(readme))
	bin := buildFleetq(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin", "fleetq")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	url := startServe(ctx, t, bin, args)

	// One script: each block after a line that marks where its output
	// starts; a failing command ends it (set -e), and the background jobs
	// end with it.
	const mark = "--- fleetq README block %d ---"
	var script strings.Builder
	script.WriteString("set -eo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n")
	for i, b := range blocks {
		fmt.Fprintf(&script, "echo '"+mark+"'\n%s\n", i, strings.ReplaceAll(b.script, readmeURL, url))
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	got := out.String()
	t.Logf("the README's blocks:\n%s", got)
	if wlog, err := os.ReadFile(filepath.Join(dir, "worker.log")); err == nil {
		t.Logf("worker.log:\n%s", wlog)
	}
	if runErr != nil {
		failed := "the script"
		for i, b := range blocks {
			if strings.Contains(got, fmt.Sprintf(mark, i)+"\n") {
				failed = fmt.Sprintf("README.md:%d: the block", b.line)
			}
		}
		t.Errorf("%s failed: %v", failed, runErr)
	}
	for i, b := range blocks {
		_, rest, ok := strings.Cut(got, fmt.Sprintf(mark, i)+"\n")
		if !ok {
			t.Errorf("README.md:%d: the block did not run", b.line)
			continue
		}
		own, _, _ := strings.Cut(rest, fmt.Sprintf(mark, i+1)+"\n")
		if w := matchOutput(b.output, own); w != "" {
			t.Errorf("README.md:%d: the block's output has no line %q after the ones before it:\n%s", b.line, w, own)
		}
	}
}
