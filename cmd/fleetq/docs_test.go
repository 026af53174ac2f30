package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The docs this test keeps true, from the repository's root. docs/api.md's
// route table is kept in step with the router both ways by
// pkg/service/api's TestDocsListEveryRoute.
const repoRoot = "../.."

// docFiles are README.md and docs/*.md, by their paths in the repository.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("docs/*.md: %v (%d files)", err, len(files))
	}
	names := []string{"README.md"}
	for _, f := range files {
		names = append(names, path.Join("docs", filepath.Base(f)))
	}
	return names
}

// docText is a piece of code a markdown file shows: a `span`, or one line
// of a fenced block or of a block indented four spaces.
type docText struct {
	text string
	span bool
}

// docCode is the code a markdown file shows. A span may run over the
// lines of a paragraph; each row of a table is a paragraph of its own.
func docCode(md string) []docText {
	var code []docText
	var para []string
	flush := func() {
		for _, m := range codeSpan.FindAllStringSubmatch(strings.Join(para, " "), -1) {
			code = append(code, docText{text: m[1], span: true})
		}
		para = para[:0]
	}
	fenced := false
	for line := range strings.SplitSeq(md, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			flush()
			fenced = !fenced
		case fenced, strings.HasPrefix(line, "    ") && !strings.HasPrefix(trimmed, "- ") && !strings.HasPrefix(trimmed, "|"):
			flush()
			// A shell comment is prose.
			line, _, _ = strings.Cut(line, " # ")
			// A line ending in a backslash goes on in the next.
			if n := len(code); n > 0 && !code[n-1].span && strings.HasSuffix(code[n-1].text, "\\") {
				code[n-1].text = strings.TrimSuffix(code[n-1].text, "\\") + " " + strings.TrimSpace(line)
				continue
			}
			code = append(code, docText{text: line})
		case trimmed == "", strings.HasPrefix(trimmed, "|"), strings.HasPrefix(trimmed, "#"):
			flush()
			para = append(para, line)
			flush()
		default:
			para = append(para, line)
		}
	}
	flush()
	return code
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

var (
	// A link to a file of the repository, relative to the document.
	linkTarget = regexp.MustCompile(`\]\(([^)#\s]+)`)
	// A Go test, benchmark, fuzz test or example by name.
	citedTest = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz|Example)[A-Z_][A-Za-z0-9_]*)`)
	// An environment variable of fleetq's or of the AWS SDK's, or a pattern
	// of them (FLEETQ_<SERVICE>_ENDPOINT).
	citedEnv = regexp.MustCompile(`\b((?:FLEETQ|AWS)_[A-Z0-9_]*(?:<[A-Za-z_]+>[A-Z0-9_]*)*)`)
	// make, its targets, and the variables set on its command line.
	citedMake = regexp.MustCompile(`(?:^|[\s;&(])make((?:\s+[a-z][a-z0-9-]*)*)((?:\s+[A-Z_][A-Z0-9_]*=(?:"[^"]*"|'[^']*'|\S*))*)`)
	makeVar   = regexp.MustCompile(`([A-Z_][A-Z0-9_]*)=("[^"]*"|'[^']*'|\S*)`)
	// A CLI command line: fleetq (or a path to it, or go run ./cmd/fleetq)
	// at the start of a command, the command, and the rest of the line (a
	// subcommand, flags).
	citedCLI = regexp.MustCompile(`(?:^\s*|[;&|(]\s*|\$ |go run \./cmd/)(?:[A-Z_]+=\S*\s+)*(?:\S*/)?fleetq ([a-z][a-z-]*)(\s[^|;&)]*|$)`)
	cliFlag  = regexp.MustCompile(`(?:^|\s)--?([a-z][a-z0-9-]*)`)
	// A flag shown alone: `--tick`, `--bridge N`, or flags by a prefix
	// (`--warmup-*`). Another program's flag is shown with the program
	// (`nvidia-smi --query-gpu`).
	citedFlag = regexp.MustCompile(`^--([a-z][a-z0-9-]*)(\*?)`)
	// A section of a document by its title: docs/scaling.md "Caps",
	// (docs/api.md, "Webhooks" and "Attested registration").
	citedSection = regexp.MustCompile(`([A-Za-z0-9/._-]+\.md)\)?,? ((?:"[^"\n]+"(?:,? (?:and|or) )?)+)`)
	quoted       = regexp.MustCompile(`"([^"\n]+)"`)
	// An exported Go identifier of a package by the package's name:
	// `scaling.DecideLadder`, `localaws.Account`.
	citedIdent = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./])([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)`)
	// go test with its flags and packages.
	citedGoTest = regexp.MustCompile(`\bgo test\b([^|;&]*)`)
)

// TestDocsCiteWhatExists keeps README.md, docs/*.md, the Python client's
// README and the descriptions of scripts/*/package.json true to the tree:
// every path they cite, in code or in prose, is a file or folder git
// tracks (or one .gitignore says a build writes), every link leads to one,
// every section cited by its title is in its document, and so does every
// Go identifier they name by its package, every Go test (in the package a
// go test line runs), every environment variable (FLEETQ_ ones read by the
// code, AWS_ ones named by it), every make target and variable, every
// fleetq command and subcommand, and every flag shown after one or alone.
func TestDocsCiteWhatExists(t *testing.T) {
	t.Parallel()
	tr := readTree(t)
	files := docFiles(t)
	pkgs, err := filepath.Glob(filepath.Join(repoRoot, "scripts", "*", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		files = append(files, path.Join("scripts", filepath.Base(filepath.Dir(p)), "package.json"))
	}
	files = append(files, "clients/python/README.md")
	for _, name := range files {
		data := readRepoFile(t, name)
		if strings.HasSuffix(name, ".json") {
			// Only its description is prose; say it as code to check its paths.
			var p struct{ Description string }
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			data = []byte("`" + p.Description + "`")
		}
		for _, problem := range tr.check(name, string(data)) {
			t.Errorf("%s: %s", name, problem)
		}
	}
}

// TestDocsCheckFindsWhatDoesNotExist shows each kind of check failing: a
// document citing one made-up thing gets that one problem, and the same
// kind of citation of what exists gets none.
func TestDocsCheckFindsWhatDoesNotExist(t *testing.T) {
	t.Parallel()
	tr := readTree(t)
	for _, c := range []struct {
		kind, doc, cites, want string
	}{
		{"link", "docs/x.md", "See [the guide](nowhere.md).", "links to nowhere.md"},
		{"path in code", "README.md", "`pkg/aws/store/nowhere_test.go`", "cites pkg/aws/store/nowhere_test.go"},
		{"path in prose", "README.md", "as pkg/aws/store/nowhere.go says.", "cites pkg/aws/store/nowhere.go"},
		{"path of a package to test", "README.md", "    go test -count=1 ./pkg/nowhere/", "cites pkg/nowhere"},
		{"path pattern", "README.md", "each stage's `config/<stage>.toml`", "cites config/<stage>.toml"},
		{"identifier of a package", "README.md", "`pkg/domain/forecast.NoSuchFunc`", "cites pkg/domain/forecast.NoSuchFunc"},
		{"test", "README.md", "TestNoSuchThing proves it.", "names TestNoSuchThing"},
		{"benchmark", "README.md", "`go test -bench BenchmarkNoSuchThing`", "names BenchmarkNoSuchThing"},
		{"fuzz test", "README.md", "FuzzNoSuchThing", "names FuzzNoSuchThing"},
		{"test in another package", "README.md", "    go test -run TestConcurrentWorkersLeaseEachJobExclusively ./pkg/domain/job/",
			"names TestConcurrentWorkersLeaseEachJobExclusively, which is no test of pkg/domain/job"},
		{"fleetq variable in code", "README.md", "`FLEETQ_NO_SUCH_VARIABLE=1`", "cites FLEETQ_NO_SUCH_VARIABLE"},
		{"fleetq variable in prose", "README.md", "set FLEETQ_NO_SUCH_VARIABLE to", "cites FLEETQ_NO_SUCH_VARIABLE"},
		{"variable pattern", "README.md", "`FLEETQ_<SERVICE>_NOWHERE`", "cites FLEETQ_<SERVICE>_NOWHERE"},
		{"AWS variable", "README.md", "with AWS_NO_SUCH_VARIABLE set", "cites AWS_NO_SUCH_VARIABLE"},
		{"make target", "README.md", "    make no-such-target", "cites make no-such-target"},
		{"make variable", "README.md", "`make synth NO_SUCH_VAR=dev`", "cites make NO_SUCH_VAR"},
		{"flag passed by make", "README.md", "`make serve ARGS=\"--tick 10s --no-such-flag\"`", "cites fleetq dev --no-such-flag"},
		{"command", "README.md", "    fleetq no-such-command", "cites fleetq no-such-command"},
		{"command run by go run", "README.md", "    go run ./cmd/fleetq serve --addr :8080", "cites fleetq serve"},
		{"flag", "README.md", "    fleetq dev --no-such-flag", "cites fleetq dev --no-such-flag"},
		{"flag in a span over two lines", "README.md", "then run `fleetq dev\n--no-such-flag` to", "cites fleetq dev --no-such-flag"},
		{"flag on a continued line", "README.md", "    fleetq dev --tick 1s \\\n      --no-such-flag", "cites fleetq dev --no-such-flag"},
		{"subcommand", "README.md", "    fleetq jobs frobnicate", "cites fleetq jobs frobnicate"},
		{"subcommand after a fixed word", "README.md", "    fleetq tenants keys frobnicate", "cites fleetq tenants keys frobnicate"},
		{"flag of a subcommand", "README.md", "    fleetq jobs submit --tenant t --no-such-flag x", "cites fleetq jobs submit --no-such-flag"},
		{"flag alone", "README.md", "then `--no-such-flag` changes that", "cites --no-such-flag"},
		{"flags alone by a prefix", "README.md", "the `--no-such-*` flags", "cites --no-such-*"},
		{"one of several paths", "README.md", "functions/{api,nowhere}", "cites functions/nowhere"},
		{"identifier", "README.md", "`scaling.NoSuchPolicy`", "cites scaling.NoSuchPolicy"},
		{"method", "README.md", "`store.Store.NoSuchMethod`", "cites store.Store.NoSuchMethod"},
		{"section", "docs/x.md", `(docs/scaling.md, "Caps" and "No such section")`, `cites docs/scaling.md "No such section"`},
		{"section of a sibling", "docs/x.md", `(api.md "Nowhere")`, `cites docs/api.md "Nowhere"`},
	} {
		t.Run(c.kind, func(t *testing.T) {
			got := tr.check(c.doc, c.cites)
			if len(got) != 1 || !strings.Contains(got[0], c.want) {
				t.Errorf("%s reported %q, want one problem with %q", c.cites, got, c.want)
			}
		})
	}
	for _, c := range []struct{ kind, doc, cites string }{
		{"link", "docs/x.md", "See [the guide](testing.md), [the README](../README.md) and [the site](https://example.com/x.md)."},
		{"paths", "README.md", "`pkg/aws/store/concurrency_test.go`, pkg/aws/store/doc.go, `pkg/aws/store/` and `./pkg/...`."},
		{"generated path", "README.md", "the CDK's `cdk.out/`, `scripts/nag/node_modules/`, bin/fleetq"},
		{"path patterns", "README.md", "`config/<stage>.yaml`, `functions/<name>/main.go`, `events/*.json`, functions/{api,dispatch}/main.go"},
		{"identifiers of a package", "README.md", "`pkg/domain/forecast.Expect`, `pkg/aws/store.Store.LeaseNext`"},
		{"tests", "README.md", "    go test -count=1 -run 'TestConcurrentWorkersLeaseEachJobExclusively|TestDocs' ./pkg/aws/store/ ./cmd/fleetq/"},
		{"variables", "README.md", "`FLEETQ_TEST_DYNALITE=1`, FLEETQ_API, `FLEETQ_<SERVICE>_ENDPOINT`, `AWS_ENDPOINT_URL_<SERVICE>`, AWS_REGION, every FLEETQ_* variable"},
		{"make", "README.md", "    make lint test   # as make runs it\n    make synth STAGE=dev\n    make serve ARGS=\"--tick 10s --no-local-fleet\""},
		{"commands", "README.md", "    fleetq dev --chaos 0.05\n    FLEETQ_API=http://127.0.0.1:8080 bin/fleetq jobs submit --tenant t --workflow w --input '{}'\n    go run ./cmd/fleetq tenants keys create --tenant t --name n\n    fleetq help"},
		{"flags alone", "README.md", "`--spot-rate`, `--bridge N`, `--json`, `--warmup-*`, `nvidia-smi --query-gpu`"},
		{"identifiers", "README.md", "`scaling.DecideLadder`, `localaws.Account`, `store.Store.LeaseNext`, `json.Unmarshal`, `fleetq.Client`"},
		{"sections", "docs/x.md", `docs/scaling.md "Caps", (api.md, "Webhooks" and "Attested registration"), docs/benchmarks.md, "By how much the rest misses"; docs/data-model.md "Cost total"`},
	} {
		t.Run("exists/"+c.kind, func(t *testing.T) {
			if got := tr.check(c.doc, c.cites); len(got) != 0 {
				t.Errorf("%s reported %q, want nothing", c.cites, got)
			}
		})
	}
}

// TestDocsEnvironmentNamedAsItMustBe shows what counts as naming a
// variable: fleetq's own must be read (a Go string, a script), not only
// mentioned in a comment; AWS's, read by the SDK, need only be named.
func TestDocsEnvironmentNamedAsItMustBe(t *testing.T) {
	t.Parallel()
	env := envNames{
		"FLEETQ_READ":       envRead,
		"FLEETQ_COMMENTED":  envMentioned,
		"FLEETQ_A_ENDPOINT": envRead,
		"AWS_COMMENTED":     envMentioned,
		"AWS_ENDPOINT_URL_": envRead,
		"FLEETQ_":           envRead,
	}
	for cited, want := range map[string]bool{
		"FLEETQ_READ": true, "FLEETQ_COMMENTED": false, "FLEETQ_NOWHERE": false,
		"AWS_COMMENTED": true, "AWS_NOWHERE": false,
		"FLEETQ_<SERVICE>_ENDPOINT": true, "FLEETQ_<SERVICE>_URL": false,
		"AWS_ENDPOINT_URL_<SERVICE>": true, "AWS_<SERVICE>_URL": false,
		"FLEETQ_": true, "AWS_": true, "AWS_ENDPOINT_": true, "AWS_NOWHERE_": false,
	} {
		if got := env.has(cited); got != want {
			t.Errorf("has(%s) = %v, want %v", cited, got, want)
		}
	}
}

// check answers the problems of one markdown document (its path in the
// repository), each once.
func (tr *tree) check(doc, md string) []string {
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
		if p := path.Join(path.Dir(doc), target); !tr.files[p] && !tr.generated(p) {
			fail("links to %s, which is no file or folder git tracks", target)
		}
	}
	for _, m := range citedSection.FindAllStringSubmatch(md, -1) {
		for _, title := range quoted.FindAllStringSubmatch(m[2], -1) {
			if target, ok := tr.hasSection(doc, m[1], title[1]); !ok {
				fail("cites %s %q, which has no such section", target, title[1])
			}
		}
	}
	// Paths, tests and variables count in prose as in code.
	for _, m := range tr.pathRe.FindAllStringSubmatch(md, -1) {
		if p := tr.pathProblem(m[1]); p != "" {
			fail("cites %s, which is no file or folder git tracks", p)
		}
	}
	for _, m := range citedTest.FindAllStringSubmatch(md, -1) {
		if !tr.tests.has(m[1]) {
			fail("names %s, which is no test, benchmark, fuzz test or example", m[1])
		}
	}
	for _, m := range citedEnv.FindAllStringSubmatch(md, -1) {
		if !tr.env.has(m[1]) {
			fail("cites %s, which %s", m[1], map[bool]string{true: "nothing reads", false: "nothing names"}[strings.HasPrefix(m[1], "FLEETQ_")])
		}
	}
	for _, code := range docCode(md) {
		tr.checkCode(fail, code)
	}
	return problems
}

// checkCode checks the commands a piece of code cites.
func (tr *tree) checkCode(fail func(string, ...any), code docText) {
	for _, m := range citedMake.FindAllStringSubmatch(code.text, -1) {
		targets := strings.Fields(m[1])
		for _, target := range targets {
			if _, ok := tr.make.targets[target]; !ok {
				fail("cites make %s, which the Makefile has no target for", target)
			}
		}
		for _, v := range makeVar.FindAllStringSubmatch(m[2], -1) {
			if !tr.make.vars[v[1]] {
				fail("cites make %s=, which the Makefile does not use", v[1])
				continue
			}
			if v[1] != "ARGS" {
				continue
			}
			for _, target := range targets {
				if cmd := tr.make.runs(target); cmd != "" {
					tr.checkCLI(fail, cmd, " "+strings.Trim(v[2], `"'`))
				}
			}
		}
	}
	for _, m := range citedCLI.FindAllStringSubmatch(code.text, -1) {
		tr.checkCLI(fail, m[1], m[2])
	}
	if m := citedFlag.FindStringSubmatch(code.text); code.span && m != nil && !tr.cli.takes(m[1], m[2] == "*") {
		fail("cites --%s%s, which no fleetq command takes", m[1], m[2])
	}
	for _, m := range citedIdent.FindAllStringSubmatch(code.text, -1) {
		if tr.packages[m[1]] != nil && !tr.declares(m[1], m[2]) {
			fail("cites %s.%s, which package %s does not declare", m[1], m[2], m[1])
		}
	}
	for _, m := range citedGoTest.FindAllStringSubmatch(code.text, -1) {
		tr.checkGoTest(fail, strings.Fields(m[1]))
	}
}

// checkCLI checks a cited command line: the command exists, so does the
// subcommand its usage offers (fleetq jobs <submit|…>, fleetq tenants
// keys <create|…>), and each flag after them is one the command takes.
func (tr *tree) checkCLI(fail func(string, ...any), name, rest string) {
	if name == "help" {
		return
	}
	if _, ok := commands[name]; !ok {
		fail("cites fleetq %s, which is no command of the CLI", name)
		return
	}
	cmd := []string{name}
	flags := tr.cli.flags[name]
	if usages := tr.cli.usages[name]; usages != nil {
		fields := strings.Fields(rest)
		most := 0
		for _, u := range usages {
			most = max(most, len(u.words))
		}
		n := 0
		for n < len(fields) && n <= most && !strings.HasPrefix(fields[n], "-") {
			n++
		}
		var match *cliUsage
		for i, u := range usages {
			if n > len(u.words) && slices.Equal(fields[:len(u.words)], u.words) && slices.Contains(u.subs, fields[len(u.words)]) {
				match = &usages[i]
			}
		}
		switch {
		case n == 0:
			// No subcommand: a flag must be one of some subcommand's.
			flags = map[string]bool{}
			for _, u := range usages {
				for _, sub := range u.subs {
					for f := range tr.cli.flags[strings.Join(append(append([]string{name}, u.words...), sub), " ")] {
						flags[f] = true
					}
				}
			}
		case match == nil:
			var offered []string
			for _, u := range usages {
				offered = append(offered, fmt.Sprintf("fleetq %s <%s>", strings.Join(append([]string{name}, u.words...), " "), strings.Join(u.subs, "|")))
			}
			fail("cites fleetq %s %s, which is no subcommand of %s", name, strings.Join(fields[:n], " "), strings.Join(offered, " or "))
			return
		default:
			cmd = append(cmd, fields[:len(match.words)+1]...)
			flags = tr.cli.flags[strings.Join(cmd, " ")]
		}
	}
	for _, m := range cliFlag.FindAllStringSubmatch(rest, -1) {
		if f := m[1]; f != "h" && f != "help" && !flags[f] {
			fail("cites fleetq %s --%s, which %s does not take", strings.Join(cmd, " "), f, strings.Join(cmd, " "))
		}
	}
}

// checkGoTest checks that the tests a go test line runs (-run, -bench,
// -fuzz) are in the packages it names.
func (tr *tree) checkGoTest(fail func(string, ...any), args []string) {
	var names, dirs []string
	for i, a := range args {
		a = strings.Trim(a, `"'`)
		if flag, value, ok := strings.Cut(a, "="); ok && (flag == "-run" || flag == "-bench" || flag == "-fuzz") {
			names = append(names, strings.Split(strings.Trim(value, `"'`), "|")...)
		} else if (a == "-run" || a == "-bench" || a == "-fuzz") && i+1 < len(args) {
			names = append(names, strings.Split(strings.Trim(args[i+1], `"'`), "|")...)
		} else if strings.HasPrefix(a, "./") {
			if strings.Contains(a, "...") {
				return // a tree of packages
			}
			dirs = append(dirs, path.Clean(a))
		}
	}
	if len(dirs) == 0 {
		return
	}
	for _, n := range names {
		n, _, _ = strings.Cut(strings.Trim(n, "^$()"), "/")
		if citedTest.MatchString(n) && goIdent.MatchString(n) && tr.tests.has(n) && !tr.testIn(n, dirs) {
			fail("names %s, which is no test of %s", n, strings.Join(dirs, " or "))
		}
	}
}

var goIdent = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// pathPattern finds a path in the repository: it starts with one of the
// top folders git tracks, optionally after ./.
func pathPattern(topFolders []string) *regexp.Regexp {
	tops := make([]string, len(topFolders))
	for i, top := range topFolders {
		tops[i] = regexp.QuoteMeta(top)
	}
	return regexp.MustCompile(`(?:^|[\s(="'\[*` + "`" + `])(?:\./)?((?:` + strings.Join(tops, "|") + `)/(?:[A-Za-z0-9_./@<>*…-]|\{[^{}\s]*\})*)(?:$|[^A-Za-z0-9_-])`)
}

// pathProblem is the cited path p, cleaned, when it does not exist, or "".
// Each alternative of functions/{api,dispatch} must exist; a pattern
// (config/<stage>.yaml, events/*.json) must match some path; a Go
// identifier may follow a package's path (pkg/domain/forecast.Expect,
// pkg/aws/store.Store.LeaseNext).
func (tr *tree) pathProblem(p string) string {
	p = strings.TrimSuffix(strings.TrimRight(p, ".,:;"), "**") // **bold**
	p = strings.TrimSuffix(p, "/...")
	p = strings.TrimRight(p, "/")
	if strings.Contains(p, "@") {
		return "" // a package at a version, or an instance type@zone
	}
	if b := braces.FindStringSubmatchIndex(p); b != nil {
		for alt := range strings.SplitSeq(p[b[2]:b[3]], ",") {
			if problem := tr.pathProblem(p[:b[0]] + alt + p[b[1]:]); problem != "" {
				return problem
			}
		}
		return ""
	}
	if i := strings.IndexAny(p, "<>*…"); i >= 0 {
		if tr.generated(strings.TrimRight(p[:i], "/")) {
			return ""
		}
		glob := regexp.MustCompile(`<[^>]*>|…`).ReplaceAllString(p, "*")
		for f := range tr.files {
			if ok, _ := path.Match(glob, f); ok {
				return ""
			}
		}
		return p
	}
	if tr.files[p] || tr.generated(p) {
		return ""
	}
	slash := strings.LastIndex(p, "/")
	if dir, idents, ok := strings.Cut(p[slash+1:], "."); ok && idents != "" {
		decls := tr.decls[p[:slash+1]+dir]
		for id := range strings.SplitSeq(idents, ".") {
			ok = ok && decls[id]
		}
		if ok {
			return ""
		}
	}
	return p
}

// hasSection reports whether the markdown file a document cites (relative
// to it, or to the root) has a section of that title: a heading that says
// it (and perhaps more after a colon, comma, period or parenthesis), a
// paragraph that starts with it in bold, or a table row that names it
// first.
func (tr *tree) hasSection(doc, file, title string) (string, bool) {
	target := path.Join(path.Dir(doc), file)
	if !tr.files[target] {
		target = path.Clean(file)
	}
	if !tr.files[target] {
		return file, true // a file of elsewhere; a link or path in it is checked as one
	}
	for _, s := range tr.sections[target] {
		if rest, ok := strings.CutPrefix(s, title); ok && (rest == "" || strings.ContainsAny(rest[:1], ":,.") || strings.HasPrefix(rest, " (")) {
			return target, true
		}
	}
	return target, false
}

var sectionTitle = regexp.MustCompile(`(?m)^#+ +(.+?)\s*$|\*\*([^*\n]+)\*\*|^\| ([^|\n]+?) +\|`)

// sectionTitles are the headings, bold phrases and first cells of table
// rows of a markdown file.
func sectionTitles(md string) []string {
	var titles []string
	for _, m := range sectionTitle.FindAllStringSubmatch(md, -1) {
		titles = append(titles, m[1]+m[2]+m[3])
	}
	return titles
}

var braces = regexp.MustCompile(`\{([^{}]*)\}`)

// TestReadmeSaysHowToServeTheAPI: a user looking for "serve the API"
// finds make serve, so the README says what it runs (the Makefile's serve
// target), and, while the CLI has no serve command, that it has none.
func TestReadmeSaysHowToServeTheAPI(t *testing.T) {
	t.Parallel()
	tr := readTree(t)
	readme := string(readRepoFile(t, "README.md"))
	cmd := tr.make.runs("serve")
	if cmd == "" {
		t.Fatal("the Makefile's serve target runs no fleetq command with $(ARGS)")
	}
	if want := "`make serve` runs `fleetq " + cmd + "`"; !strings.Contains(readme, want) {
		t.Errorf("README.md does not say %s", want)
	}
	if _, ok := commands["serve"]; !ok && !strings.Contains(readme, "no separate serve command") {
		t.Errorf("README.md does not say the CLI has no separate serve command")
	}
}

// TestCodeCitesDocsThatExist: a Go comment or string (a doc comment, a
// flag's help) that cites a document, or a section of one by its title,
// cites one that exists.
func TestCodeCitesDocsThatExist(t *testing.T) {
	t.Parallel()
	tr := readTree(t)
	if len(tr.docRefs) == 0 {
		t.Fatal("no Go comment or string cites a document: the tree was not read")
	}
	for _, ref := range tr.docRefs {
		for _, p := range tr.docRefProblems(ref) {
			t.Errorf("%s:%d: %s", ref.file, ref.line, p)
		}
	}
	for _, c := range []struct{ text, want string }{
		{"see docs/nowhere.md", "cites docs/nowhere.md"},
		{`(docs/scaling.md, "Caps" and "No such section")`, `cites docs/scaling.md "No such section"`},
	} {
		if got := tr.docRefProblems(docRef{file: "pkg/x/x.go", text: c.text}); len(got) != 1 || !strings.Contains(got[0], c.want) {
			t.Errorf("%s: %q, want one problem with %q", c.text, got, c.want)
		}
	}
}

var docPath = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])(docs/[A-Za-z0-9_.-]+\.md|README\.md)`)

func (tr *tree) docRefProblems(ref docRef) []string {
	var problems []string
	for _, m := range docPath.FindAllStringSubmatch(ref.text, -1) {
		if !tr.files[m[1]] {
			problems = append(problems, fmt.Sprintf("cites %s, which is no file git tracks", m[1]))
		}
	}
	for _, m := range citedSection.FindAllStringSubmatch(ref.text, -1) {
		for _, title := range quoted.FindAllStringSubmatch(m[2], -1) {
			if target, ok := tr.hasSection(".", m[1], title[1]); !ok {
				problems = append(problems, fmt.Sprintf("cites %s %q, which has no such section", target, title[1]))
			}
		}
	}
	return problems
}

// TestPackageDocsNameTheirFiles keeps the maps in package comments true:
// every file of its own a package's doc.go names exists, and a doc.go that
// names most of the package's files (as pkg/aws/store's does) names them all.
func TestPackageDocsNameTheirFiles(t *testing.T) {
	t.Parallel()
	tr := readTree(t)
	for doc := range tr.files {
		if path.Base(doc) != "doc.go" {
			continue
		}
		problems := packageDocProblems(tr, doc, string(readRepoFile(t, doc)))
		for _, p := range problems {
			t.Errorf("%s: %s", doc, p)
		}
	}
	// The check fails: a made-up file, and a list of all files but one.
	if got := packageDocProblems(tr, "pkg/aws/store/doc.go", "// Its files: nowhere.go."); len(got) != 1 || !strings.Contains(got[0], "nowhere.go") {
		t.Errorf("a doc naming nowhere.go: %q, want it reported", got)
	}
	var all []string
	for f := range tr.files {
		if path.Dir(f) == "pkg/aws/store" && strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go") && path.Base(f) != "doc.go" {
			all = append(all, path.Base(f))
		}
	}
	slices.Sort(all)
	if got := packageDocProblems(tr, "pkg/aws/store/doc.go", "// Its files: "+strings.Join(all[1:], ", ")); len(got) != 1 || !strings.Contains(got[0], all[0]) {
		t.Errorf("a doc naming all files but %s: %q, want it reported", all[0], got)
	}
}

var goFileName = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])([a-z0-9_]+\.go)\b`)

// packageDocProblems are the problems of one doc.go's list of files.
func packageDocProblems(tr *tree, doc, src string) []string {
	dir := path.Dir(doc)
	var own []string
	for f := range tr.files {
		if path.Dir(f) == dir && strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go") && path.Base(f) != "doc.go" {
			own = append(own, path.Base(f))
		}
	}
	slices.Sort(own)
	var problems []string
	named := map[string]bool{}
	for _, m := range goFileName.FindAllStringSubmatch(src, -1) {
		if named[m[1]] {
			continue
		}
		named[m[1]] = true
		if !slices.Contains(own, m[1]) && m[1] != "doc.go" {
			problems = append(problems, fmt.Sprintf("names %s, which is no file of %s", m[1], dir))
		}
	}
	if 2*len(named) > len(own) {
		for _, f := range own {
			if !named[f] {
				problems = append(problems, fmt.Sprintf("names most of the package's files but not %s", f))
			}
		}
	}
	return problems
}

// TestDocsListEveryPackageAndCommand keeps the maps of the tree whole:
// docs/architecture.md's tree has a line for every package under pkg/ and
// names every command of the CLI, and its layout table names every
// package in its group's row.
func TestDocsListEveryPackageAndCommand(t *testing.T) {
	t.Parallel()
	arch, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
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
		row := regexp.MustCompile("(?m)^\\| `pkg/[^|]*\\b" + group + "\\b[^|]*` \\|.*$").Find(arch)
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			name := e.Name()
			if !regexp.MustCompile(`(?m)^ {4}` + regexp.QuoteMeta(name) + `\s`).Match(arch) {
				t.Errorf("docs/architecture.md's tree has no line for pkg/%s/%s", group, name)
			}
			if !bytes.Contains(row, []byte("`"+name+"`")) {
				t.Errorf("docs/architecture.md's layout table does not name pkg/%s/%s in the row of pkg/%s", group, name, group)
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
