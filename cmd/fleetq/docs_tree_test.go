package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// tree is what the docs may cite, read from the repository's files: no
// compiling, so the check stays fast.
type tree struct {
	files   map[string]bool // git ls-files, and every folder above one
	tops    []string        // the top folders of those files
	pathRe  *regexp.Regexp  // a path under one of them
	ignored []string        // the paths .gitignore lists: outputs a build or a tool writes
	tests   testNames
	// testDirs are the folders of each test's package.
	testDirs map[string][]string
	// decls are the names declared at the top of each Go package, by folder:
	// functions and methods, types, variables and constants.
	decls map[string]map[string]bool
	// packages are the folders of each Go package by its name, but main's.
	packages map[string][]string
	env      envNames
	// docRefs are the Go comments and strings that cite a markdown file.
	docRefs []docRef
	// sections are the titles of each markdown file's sections, by path.
	sections map[string][]string
	make     makefile
	cli      cliTable
}

// The files whose Go is left out of what the code reads: their made-up
// citations, which the check must report, would otherwise exist.
var madeUpCitations = []string{"cmd/fleetq/docs_test.go", "cmd/fleetq/docs_env_test.go"}

var (
	treeOnce   sync.Once
	sharedTree *tree
	treeErr    error
)

// readTree reads the tree once for every test of the docs, which only
// read it. Without git or a checkout they skip, but under CI (as .ci/run
// and CI systems set it) they fail.
func readTree(t *testing.T) *tree {
	t.Helper()
	treeOnce.Do(func() { sharedTree, treeErr = loadTree() })
	var noGit errNoGit
	switch {
	case errors.As(treeErr, &noGit) && !onCI():
		t.Skipf("%v (not a git checkout?)", treeErr)
	case treeErr != nil:
		t.Fatal(treeErr)
	}
	return sharedTree
}

func onCI() bool {
	ci := os.Getenv("CI")
	return ci != "" && ci != "false" && ci != "0"
}

func loadTree() (*tree, error) {
	files, err := trackedFiles()
	if err != nil {
		return nil, err
	}
	tr := &tree{files: files, testDirs: map[string][]string{}, decls: map[string]map[string]bool{}, env: envNames{},
		sections: map[string][]string{}, packages: map[string][]string{}}
	for f := range tr.files {
		if top, _, ok := strings.Cut(f, "/"); ok && !slices.Contains(tr.tops, top) {
			tr.tops = append(tr.tops, top)
		}
	}
	sort.Strings(tr.tops)
	tr.pathRe = pathPattern(tr.tops)
	gitignore, err := os.ReadFile(filepath.Join(repoRoot, ".gitignore"))
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(gitignore)) {
		if g := strings.Trim(strings.TrimSpace(line), "/"); g != "" && !strings.ContainsAny(g, "*#!") {
			tr.ignored = append(tr.ignored, g)
		}
	}
	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		return nil, err
	}
	tr.make = readMakefile(makefile)
	tr.cli = readCLI()
	return tr, tr.readSources()
}

func readRepoFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// errNoGit is git ls-files failing: no git, or no checkout.
type errNoGit struct{ err error }

func (e errNoGit) Error() string {
	return fmt.Sprintf("git ls-files, the tree the docs are checked against: %v", e.err)
}

// trackedFiles are the files git tracks (git ls-files) and the folders
// above them: what a clean clone has.
func trackedFiles() (map[string]bool, error) {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = errors.New(strings.TrimSpace(string(exit.Stderr)))
		}
		return nil, errNoGit{err}
	}
	files := map[string]bool{}
	for f := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
		if _, err := os.Stat(filepath.Join(repoRoot, f)); err != nil {
			continue // deleted in the work tree, not yet committed
		}
		for p := f; p != "."; p = path.Dir(p) {
			files[p] = true
		}
	}
	return files, nil
}

// generated reports whether p is, or is under, a path .gitignore lists.
func (tr *tree) generated(p string) bool {
	for _, g := range tr.ignored {
		if p == g || strings.HasPrefix(p, g+"/") {
			return true
		}
	}
	return false
}

// readSources reads every tracked Go file for its tests, its declarations
// and the environment variables it names, every markdown file for the
// sections others cite, and every other tracked file (scripts, infra, the
// Makefile, CI) for the variables it names.
func (tr *tree) readSources() error {
	fset := token.NewFileSet()
	for f := range tr.files {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			continue // a folder
		}
		switch {
		case strings.HasSuffix(f, ".md"):
			tr.sections[f] = sectionTitles(string(data))
		case strings.HasSuffix(f, ".go"):
			file, err := parser.ParseFile(fset, f, data, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			tr.readGo(fset, f, file)
		default:
			tr.env.addWords(string(data), true)
		}
	}
	sort.Strings(tr.tests)
	return nil
}

var testDecl = regexp.MustCompile(`^(?:Test|Benchmark|Fuzz|Example)(?:[A-Z_0-9]|$)`)

// docRef is a Go comment or string that cites a markdown file.
type docRef struct {
	file string
	line int
	text string // its lines joined by spaces
}

func (tr *tree) noteDocRef(file string, line int, text string) {
	if strings.Contains(text, ".md") {
		tr.docRefs = append(tr.docRefs, docRef{file: file, line: line, text: strings.Join(strings.Fields(text), " ")})
	}
}

func (tr *tree) readGo(fset *token.FileSet, name string, file *ast.File) {
	dir := path.Dir(name)
	decls := tr.decls[dir]
	if decls == nil {
		decls = map[string]bool{}
		tr.decls[dir] = decls
	}
	if pkg := file.Name.Name; pkg != "main" && !strings.HasSuffix(pkg, "_test") && !slices.Contains(tr.packages[pkg], dir) {
		tr.packages[pkg] = append(tr.packages[pkg], dir)
	}
	for _, d := range file.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			decls[d.Name.Name] = true
			if strings.HasSuffix(name, "_test.go") && d.Recv == nil && testDecl.MatchString(d.Name.Name) {
				tr.tests = append(tr.tests, d.Name.Name)
				tr.testDirs[d.Name.Name] = append(tr.testDirs[d.Name.Name], dir)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					decls[s.Name.Name] = true
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, f := range st.Fields.List {
							for _, n := range f.Names {
								decls[n.Name] = true
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						decls[n.Name] = true
					}
				}
			}
		}
	}
	if slices.Contains(madeUpCitations, name) {
		return
	}
	for _, c := range file.Comments {
		tr.env.addWords(c.Text(), false)
		tr.noteDocRef(name, fset.Position(c.Pos()).Line, c.Text())
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				s, _ := strconv.Unquote(n.Value)
				tr.env.addWords(s, true)
				tr.noteDocRef(name, fset.Position(n.Pos()).Line, s)
			}
		case *ast.CallExpr:
			// fleetq worker's env("NAME") reads FLEETQ_NAME.
			if fn, ok := n.Fun.(*ast.Ident); ok && fn.Name == "env" && len(n.Args) > 0 {
				if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					tr.env["FLEETQ_"+s] |= envRead
				}
			}
		}
		return true
	})
}

// envNames are the environment variables the tree names: each with how.
type envNames map[string]envUse

type envUse uint8

const (
	// envRead: in a Go string (read, set or passed on) or in a script,
	// the infra's files, the Makefile or CI.
	envRead envUse = 1 << iota
	// envMentioned: in a Go comment only.
	envMentioned
)

var envWord = regexp.MustCompile(`\b(?:FLEETQ|AWS)_[A-Z0-9_]*`)

// addWords notes the variables s names; one ending in _ is a prefix the
// code completes ("FLEETQ_" + name).
func (e envNames) addWords(s string, read bool) {
	if !strings.Contains(s, "FLEETQ_") && !strings.Contains(s, "AWS_") {
		return
	}
	use := envMentioned
	if read {
		use = envRead
	}
	for _, w := range envWord.FindAllString(s, -1) {
		e[w] |= use
	}
}

// has reports whether a cited variable is named as it must be: fleetq's
// own (FLEETQ_) read by the code, AWS's (read by the SDK) at least named
// by it. A citation may be a pattern: FLEETQ_<SERVICE>_ENDPOINT needs a
// variable of that shape (or, for AWS_ENDPOINT_URL_<SERVICE>, the prefix
// the code completes), and a bare prefix (FLEETQ_, FLEETQ_*) a variable
// starting with it.
func (e envNames) has(cited string) bool {
	need := envRead
	if strings.HasPrefix(cited, "AWS_") {
		need |= envMentioned
	}
	literal, _, pattern := strings.Cut(cited, "<")
	shape := regexp.QuoteMeta(cited)
	switch {
	case pattern:
		shape = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(shape, `[A-Z0-9_]+`)
	case strings.HasSuffix(cited, "_"):
		shape += `[A-Z0-9_]*`
	}
	re := regexp.MustCompile(`^` + shape + `$`)
	for name, use := range e {
		if use&need == 0 {
			continue
		}
		if re.MatchString(name) {
			return true
		}
		// The code completes a prefix longer than the namespace alone.
		if pattern && name == literal && strings.Count(literal, "_") > 1 {
			return true
		}
	}
	return false
}

// makefile is what the Makefile declares: its targets with their recipes,
// and its variables.
type makefile struct {
	targets map[string]string
	vars    map[string]bool
}

func readMakefile(data []byte) makefile {
	m := makefile{targets: map[string]string{}, vars: map[string]bool{}}
	var recipe *strings.Builder
	var names []string
	flush := func() {
		for _, n := range names {
			m.targets[n] = recipe.String()
		}
		names = nil
	}
	rule := regexp.MustCompile(`^([A-Za-z0-9_.$() /-]+):(?:[^=]|$)`)
	assign := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*[:?+]?=`)
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "\t") {
			if recipe != nil {
				recipe.WriteString(line)
			}
			continue
		}
		flush()
		if a := assign.FindStringSubmatch(line); a != nil {
			m.vars[a[1]] = true
		} else if r := rule.FindStringSubmatch(line); r != nil {
			names = strings.Fields(r[1])
			recipe = &strings.Builder{}
		}
	}
	flush()
	for _, v := range regexp.MustCompile(`\$\(([A-Z_][A-Z0-9_]*)\)`).FindAllSubmatch(data, -1) {
		m.vars[string(v[1])] = true
	}
	return m
}

// runs is the fleetq command a target runs with $(ARGS), if any.
func (m makefile) runs(target string) string {
	if c := regexp.MustCompile(`(?:\./cmd|bin)/fleetq ([a-z-]+)\b.*\$\(ARGS\)`).FindStringSubmatch(m.targets[target]); c != nil {
		return c[1]
	}
	return ""
}

// cliTable is the CLI as its help describes it: each command, the
// subcommands its usage line offers (fleetq jobs <submit|get|…>, fleetq
// tenants keys <create|…>) and the flags each prints for -h.
type cliTable struct {
	usages map[string][]cliUsage      // a command's usage lines that offer subcommands
	flags  map[string]map[string]bool // by "command [words subcommand]"
	all    map[string]bool            // every flag of every command
}

// cliUsage is one usage line offering subcommands: the fixed words before
// them ("keys") and the subcommands.
type cliUsage struct{ words, subs []string }

var (
	subUsage = regexp.MustCompile(`(?m)^usage: fleetq ([a-z][a-z ]*?) ?<([a-z|-]+)>`)
	flagHelp = regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`)
)

func readCLI() cliTable {
	c := cliTable{usages: map[string][]cliUsage{}, flags: map[string]map[string]bool{}, all: map[string]bool{}}
	for name := range commands {
		help := cliHelp(name)
		for _, u := range subUsage.FindAllStringSubmatch(strings.ReplaceAll(help, "\n       fleetq ", "\nusage: fleetq "), -1) {
			if strings.Fields(u[1])[0] != name {
				continue
			}
			cu := cliUsage{words: strings.Fields(u[1])[1:], subs: strings.Split(u[2], "|")}
			c.usages[name] = append(c.usages[name], cu)
			for _, sub := range cu.subs {
				c.addFlags(strings.Join(append(append([]string{name}, cu.words...), sub), " "))
			}
		}
		if len(c.usages[name]) == 0 {
			c.addFlags(name)
		}
	}
	return c
}

func (c cliTable) addFlags(cmd string) {
	flags := map[string]bool{}
	for _, m := range flagHelp.FindAllStringSubmatch(cliHelp(strings.Fields(cmd)...), -1) {
		flags[m[1]] = true
		c.all[m[1]] = true
	}
	c.flags[cmd] = flags
}

// takes reports whether some command takes the flag, or with prefix a
// flag starting with it.
func (c cliTable) takes(flag string, prefix bool) bool {
	for f := range c.all {
		if f == flag || prefix && strings.HasPrefix(f, flag) {
			return true
		}
	}
	return false
}

// cliHelp is what fleetq prints for args followed by -h.
func cliHelp(args ...string) string {
	var out bytes.Buffer
	runCLI(context.Background(), append(args, "-h"), &out, &out)
	return out.String()
}

// declares reports whether a package of that name declares the
// identifiers (a type and its method or field: Store.LeaseNext).
func (tr *tree) declares(pkg, idents string) bool {
	for _, dir := range tr.packages[pkg] {
		all := true
		for id := range strings.SplitSeq(idents, ".") {
			all = all && tr.decls[dir][id]
		}
		if all {
			return true
		}
	}
	return false
}

// testNames are the Go tests, benchmarks, fuzz tests and examples of the
// tree, sorted.
type testNames []string

// has reports whether name is a test, or the start of one's name (a -run
// pattern).
func (n testNames) has(name string) bool {
	i := sort.SearchStrings(n, name)
	return i < len(n) && strings.HasPrefix(n[i], name)
}

// in reports whether a test whose name starts with name is in one of dirs.
func (tr *tree) testIn(name string, dirs []string) bool {
	for i := sort.SearchStrings(tr.tests, name); i < len(tr.tests) && strings.HasPrefix(tr.tests[i], name); i++ {
		for _, d := range tr.testDirs[tr.tests[i]] {
			if slices.Contains(dirs, d) {
				return true
			}
		}
	}
	return false
}
