package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The docs this test keeps true, from the repository's root. docs/api.md's
// route table is kept in step with the router both ways by
// pkg/service/api's TestDocsListEveryRoute.
const repoRoot = "../.."

// docFiles are README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("docs/*.md: %v (%d files)", err, len(files))
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, files...)
}

// docCode is the code a markdown file shows, one string per line: the
// text of its `spans`, fenced blocks and blocks indented four spaces.
func docCode(md string) []string {
	var code []string
	fenced := false
	span := regexp.MustCompile("`([^`]+)`")
	for line := range strings.SplitSeq(md, "\n") {
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "```"):
			fenced = !fenced
		case fenced, strings.HasPrefix(line, "    ") && !strings.HasPrefix(strings.TrimSpace(line), "- ") && !strings.HasPrefix(strings.TrimSpace(line), "|"):
			// A shell comment is prose.
			line, _, _ = strings.Cut(line, " # ")
			code = append(code, line)
		default:
			for _, m := range span.FindAllStringSubmatch(line, -1) {
				code = append(code, m[1])
			}
		}
	}
	return code
}

var (
	// A path in the repository: it starts with one of its top folders.
	citedPath = regexp.MustCompile(`(?:^|[\s(="'\[])((?:\.ci|pkg|cmd|docs|infra|functions|scripts|clients|events|config)/[A-Za-z0-9_./@<>{}*-]*)`)
	// A link to a file of the repository, relative to the document.
	linkTarget = regexp.MustCompile(`\]\(([^)#\s]+)`)
	// A Go test, benchmark, fuzz test or example by name.
	citedTest = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz|Example)[A-Z_][A-Za-z0-9_]*)`)
	// One of fleetq's environment variables.
	citedEnv = regexp.MustCompile(`\b(FLEETQ_[A-Z0-9_]+)\b`)
	// A make target.
	citedMake = regexp.MustCompile(`(?:^|[\s;&(])make ((?:[a-z][a-z0-9-]*\s*)+)`)
	// A CLI command line: fleetq (or a path to it, or go run ./cmd/fleetq)
	// at the start of a command, the command, and the rest of the line (a
	// subcommand of jobs, flags).
	citedCLI = regexp.MustCompile(`(?:^\s*|[;&|(]\s*|\$ |go run \./cmd/)(?:[A-Z_]+=\S*\s+)*(?:\S*/)?fleetq ([a-z][a-z-]*)(\s[^|;&)]*|$)`)
	cliFlag  = regexp.MustCompile(`(?:^|\s)--?([a-z][a-z0-9-]*)`)
)

// TestDocsCiteWhatExists keeps README.md, docs/*.md and the descriptions
// of scripts/*/package.json true to the tree: every path they show in code
// or link to exists, and so does every Go test they name, every FLEETQ_
// environment variable (read somewhere in the code), every make target,
// every fleetq command and subcommand, and every flag shown after one.
func TestDocsCiteWhatExists(t *testing.T) {
	tree := readTree(t)
	files := docFiles(t)
	pkgs, err := filepath.Glob(filepath.Join(repoRoot, "scripts", "*", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range append(files, pkgs...) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repoRoot, file)
		if strings.HasSuffix(name, ".json") {
			// Only its description is prose; say it as code to check its paths.
			var p struct{ Description string }
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			data = []byte("`" + p.Description + "`")
		}
		for _, problem := range tree.check(filepath.Dir(file), string(data)) {
			t.Errorf("%s: %s", name, problem)
		}
	}
}

// TestDocsCheckFindsWhatDoesNotExist shows the check above failing: a
// document citing one missing thing of each kind gets one problem for
// each, and the same things as they exist get none.
func TestDocsCheckFindsWhatDoesNotExist(t *testing.T) {
	tree := readTree(t)
	bad := strings.Join([]string{
		"See [the guide](docs/nowhere.md) and `pkg/aws/store/nowhere_test.go`.",
		"Run `go test -run TestNoSuchThing ./pkg/aws/store/` with `FLEETQ_NO_SUCH_VARIABLE=1`.",
		"",
		"    make no-such-target",
		"    fleetq no-such-command",
		"    fleetq dev --no-such-flag",
		"    fleetq jobs frobnicate",
		"    fleetq jobs submit --tenant t --no-such-flag x",
	}, "\n")
	got := tree.check(repoRoot, bad)
	for _, want := range []string{"docs/nowhere.md", "pkg/aws/store/nowhere_test.go", "TestNoSuchThing", "FLEETQ_NO_SUCH_VARIABLE",
		"make no-such-target", "fleetq no-such-command", "fleetq dev --no-such-flag", "fleetq jobs frobnicate", "fleetq jobs submit --no-such-flag"} {
		if !slicesContainsSubstring(got, want) {
			t.Errorf("the check did not report %s; it reported %q", want, got)
		}
	}
	if len(got) != 9 {
		t.Errorf("the check reported %d problems, want 9: %q", len(got), got)
	}
	good := strings.Join([]string{
		"See [the guide](docs/testing.md) and `pkg/aws/store/concurrency_test.go`, `pkg/domain/forecast.Expect`, `config/<stage>.yaml`.",
		"Run `go test -run TestConcurrentWorkersLeaseEachJobExclusively ./pkg/aws/store/` with `FLEETQ_TEST_DYNALITE=1`.",
		"",
		"    make lint test   # as make runs it",
		"    fleetq dev --chaos 0.05",
		"    FLEETQ_API=http://127.0.0.1:8080 bin/fleetq jobs submit --tenant t --workflow w --input '{}'",
	}, "\n")
	if got := tree.check(repoRoot, good); len(got) != 0 {
		t.Errorf("the check reported problems in a document that cites what exists: %q", got)
	}
}

func slicesContainsSubstring(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// tree is what the docs may cite.
type tree struct {
	tests    testNames
	sources  []byte // every Go file
	makefile []byte
	ignored  []string // the paths .gitignore lists: outputs a build or a tool writes
}

// generated reports whether p is, or is under, a path .gitignore lists.
func (tr tree) generated(p string) bool {
	for _, g := range tr.ignored {
		if p == g || strings.HasPrefix(p, g+"/") {
			return true
		}
	}
	return false
}

func readTree(t *testing.T) tree {
	t.Helper()
	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	gitignore, err := os.ReadFile(filepath.Join(repoRoot, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	var ignored []string
	for line := range strings.Lines(string(gitignore)) {
		if g := strings.Trim(strings.TrimSpace(line), "/"); g != "" && !strings.ContainsAny(g, "*#!") {
			ignored = append(ignored, g)
		}
	}
	return tree{tests: goTestNames(t), sources: goSources(t), makefile: makefile, ignored: ignored}
}

// check answers the problems of one markdown document in dir, each once.
func (tr tree) check(dir, md string) []string {
	var problems []string
	seen := map[string]bool{}
	fail := func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !seen[msg] {
			seen[msg] = true
			problems = append(problems, msg)
		}
	}
	for _, m := range linkTarget.FindAllStringSubmatch(md, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, target)); err != nil {
			fail("links to %s, which does not exist", target)
		}
	}
	for _, code := range docCode(md) {
		for _, m := range citedPath.FindAllStringSubmatch(code, -1) {
			if p := cleanPath(m[1]); p != "" && !pathExists(p) && !tr.generated(p) {
				fail("cites %s, which does not exist", p)
			}
		}
		for _, m := range citedTest.FindAllStringSubmatch(code, -1) {
			if !tr.tests.has(m[1]) {
				fail("names %s, which is no test, benchmark, fuzz test or example", m[1])
			}
		}
		for _, m := range citedEnv.FindAllStringSubmatch(code, -1) {
			if !envRead(tr.sources, tr.makefile, m[1]) {
				fail("cites %s, which nothing reads", m[1])
			}
		}
		for _, m := range citedMake.FindAllStringSubmatch(code, -1) {
			for target := range strings.FieldsSeq(m[1]) {
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(tr.makefile) {
					fail("cites make %s, which the Makefile has no target for", target)
				}
			}
		}
		for _, m := range citedCLI.FindAllStringSubmatch(code, -1) {
			checkCLI(fail, m[1], m[2])
		}
	}
	return problems
}

// cleanPath is the file a cited path names, or "" for a pattern
// (`config/<stage>.yaml`, `bin/*`).
func cleanPath(p string) string {
	p = strings.TrimRight(p, ".,:;")
	if strings.ContainsAny(p, "<>{}*@") {
		return ""
	}
	return p
}

// pathExists reports whether a cited path exists, allowing a Go
// identifier after a package's path (`pkg/domain/forecast.Expect`).
func pathExists(p string) bool {
	if _, err := os.Stat(filepath.Join(repoRoot, p)); err == nil {
		return true
	}
	if dir, ident, ok := cutLast(p, "."); ok && ident != "" && ident[0] >= 'A' && ident[0] <= 'Z' {
		if st, err := os.Stat(filepath.Join(repoRoot, dir)); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

// envRead reports whether the code reads (or, for a job's command, sets)
// an environment variable: its name as a string, the name with a value
// being set, fleetq worker's env("NAME") for FLEETQ_NAME, or the Makefile.
func envRead(sources, makefile []byte, name string) bool {
	return bytes.Contains(sources, []byte(`"`+name+`"`)) || bytes.Contains(sources, []byte(`"`+name+`=`)) ||
		bytes.Contains(sources, []byte(`env("`+strings.TrimPrefix(name, "FLEETQ_")+`"`)) || bytes.Contains(makefile, []byte(name))
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// checkCLI checks a cited command line: the command exists, so does the
// subcommand of jobs (or of tenants keys), and each flag after them is one
// the command takes.
func checkCLI(fail func(string, ...any), name, rest string) {
	if name == "help" {
		return
	}
	if _, ok := commands[name]; !ok {
		fail("cites fleetq %s, which is no command of the CLI", name)
		return
	}
	args := []string{name}
	if name == "jobs" {
		fields := strings.Fields(rest)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "-") {
			return
		}
		if !strings.Contains(jobsUsage, fields[0]+" ") && !strings.Contains(jobsUsage, "|"+fields[0]) {
			fail("cites fleetq jobs %s, which is no subcommand of jobs", fields[0])
			return
		}
		args = append(args, fields[0])
	}
	if name == "tenants" {
		fields := strings.Fields(rest)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "-") {
			return
		}
		if len(fields) < 2 || fields[0] != "keys" || !strings.Contains(tenantsUsage, "  "+fields[1]+" ") && !strings.Contains(tenantsUsage, "  "+fields[1]+"\n") {
			fail("cites fleetq tenants %s, which is no subcommand of tenants keys", strings.Join(fields[:min(2, len(fields))], " "))
			return
		}
		args = append(args, "keys", fields[1])
	}
	flags := commandFlags(args)
	for _, m := range cliFlag.FindAllStringSubmatch(rest, -1) {
		if f := m[1]; f != "h" && f != "help" && !flags[f] {
			fail("cites fleetq %s --%s, which %s does not take", strings.Join(args, " "), f, strings.Join(args, " "))
		}
	}
}

var flagCache = map[string]map[string]bool{}

// commandFlags are the flags a command prints for -h.
func commandFlags(args []string) map[string]bool {
	key := strings.Join(args, " ")
	if f, ok := flagCache[key]; ok {
		return f
	}
	var out bytes.Buffer
	runCLI(context.Background(), append(args, "-h"), &out, &out)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`).FindAllStringSubmatch(out.String(), -1) {
		flags[m[1]] = true
	}
	flagCache[key] = flags
	return flags
}

// testNames are the Go tests, benchmarks, fuzz tests and examples of the
// tree.
type testNames []string

// has reports whether name is a test, or the start of one's name (a -run
// pattern).
func (n testNames) has(name string) bool {
	i := sort.SearchStrings(n, name)
	return i < len(n) && strings.HasPrefix(n[i], name)
}

func goTestNames(t *testing.T) testNames {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)[A-Za-z0-9_]*)\(`)
	var names testNames
	walkGo(t, func(path string, data []byte) {
		if strings.HasSuffix(path, "_test.go") {
			for _, m := range decl.FindAllSubmatch(data, -1) {
				names = append(names, string(m[1]))
			}
		}
	})
	sort.Strings(names)
	return names
}

// goSources is every Go file of the tree but this one, concatenated.
func goSources(t *testing.T) []byte {
	t.Helper()
	var all bytes.Buffer
	walkGo(t, func(path string, data []byte) {
		if filepath.Base(path) != "docs_test.go" { // its examples of what does not exist
			all.Write(data)
		}
	})
	return all.Bytes()
}

func walkGo(t *testing.T, fn func(path string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "cdk.out" || strings.HasPrefix(d.Name(), ".") && path != repoRoot) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fn(path, data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDocsListEveryPackageAndCommand keeps the maps of the tree whole:
// docs/architecture.md's tree has a line for every package under pkg/ and
// names every command of the CLI, and README.md's layout table names every
// package in its group's row.
func TestDocsListEveryPackageAndCommand(t *testing.T) {
	arch, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	groups, err := filepath.Glob(filepath.Join(repoRoot, "pkg", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		entries, err := os.ReadDir(g)
		if err != nil {
			continue // a file such as pkg/layers_test.go
		}
		group := filepath.Base(g)
		row := regexp.MustCompile("(?m)^\\| `pkg/[^|]*\\b" + group + "\\b[^|]*` \\|.*$").Find(readme)
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			name := e.Name()
			if !regexp.MustCompile(`(?m)^ {4}` + regexp.QuoteMeta(name) + `\s`).Match(arch) {
				t.Errorf("docs/architecture.md's tree has no line for pkg/%s/%s", group, name)
			}
			if !bytes.Contains(row, []byte("`"+name+"`")) {
				t.Errorf("README.md's layout table does not name pkg/%s/%s in the row of pkg/%s", group, name, group)
			}
		}
	}
	cli := regexp.MustCompile(`(?m)^cmd/fleetq\s+the CLI: (.*)$`).FindSubmatch(arch)
	if cli == nil {
		t.Fatal("docs/architecture.md's tree has no line for cmd/fleetq listing its commands")
	}
	for name := range commands {
		if !regexp.MustCompile(`\b` + name + `\b`).Match(cli[1]) {
			t.Errorf("docs/architecture.md's line for cmd/fleetq does not name the command %s", name)
		}
	}
}
