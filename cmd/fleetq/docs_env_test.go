package main

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
)

// The table of docs/deploy.md that documents awsenv.Vars.
const (
	functionsEnvDoc     = "docs/deploy.md"
	functionsEnvSection = "### The functions' environment"
)

// TestDocsDeclareTheFunctionsEnvironment keeps docs/deploy.md's table of
// the functions' environment and awsenv.Vars, its one declaration, in step
// both ways: every variable in both, each read by the same functions and
// set by the stack always, never or on a condition alike.
func TestDocsDeclareTheFunctionsEnvironment(t *testing.T) {
	t.Parallel()
	md := string(readRepoFile(t, functionsEnvDoc))
	_, table, ok := strings.Cut(md, functionsEnvSection+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", functionsEnvDoc, functionsEnvSection)
	}
	for _, p := range envTableProblems(table, awsenv.Vars) {
		t.Errorf("%s, %q: %s", functionsEnvDoc, strings.TrimPrefix(functionsEnvSection, "### "), p)
	}
	// The check fails: a variable missing, one too many, the wrong reader,
	// the wrong condition.
	made := strings.Join([]string{
		"| Variable | Read by | Set by the stack |",
		"|---|---|---|",
		"| `FLEETQ_STAGE` | api | always |",
		"| `FLEETQ_TABLE` | every function | when a fleet has `accept_secret` |",
		"| `FLEETQ_NO_SUCH_VARIABLE` | scaler | always |",
	}, "\n")
	vars := []awsenv.Var{{Name: "FLEETQ_STAGE", By: awsenv.Functions, When: awsenv.Always}, {Name: "FLEETQ_TABLE", By: awsenv.Functions, When: awsenv.Always},
		{Name: "FLEETQ_SUBNETS", By: []awsenv.Function{awsenv.Scaler}, When: awsenv.Always}}
	got := envTableProblems(made, vars)
	for _, want := range []string{"FLEETQ_STAGE is read by api, dispatch, interruption, scaler, wait; the table says api",
		"FLEETQ_TABLE is set always; the table says on a condition", "FLEETQ_NO_SUCH_VARIABLE is in the table", "FLEETQ_SUBNETS is not in the table"} {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, want) }) {
			t.Errorf("a made-up table: %q, want a problem with %q", got, want)
		}
	}
	if len(got) != 4 {
		t.Errorf("a made-up table: %d problems, want 4: %q", len(got), got)
	}
}

// envRow is what one row of the table says of a variable.
type envRow struct {
	by   []string
	when string // always, never or on a condition
}

var (
	parenthesis = regexp.MustCompile(`\([^()]*\)`)
	capsSpan    = regexp.MustCompile("`([A-Z0-9_<>]+)`")
)

// envTableProblems compares the table (the first one in text) with vars.
func envTableProblems(text string, vars []awsenv.Var) []string {
	doc := map[string]envRow{}
	inTable := false
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 || !strings.Contains(cells[0], "`") {
			continue // the header and its rule
		}
		row := envRow{by: readers(cells[1]), when: stackSets(cells[2])}
		var patterns, parts []string
		for _, m := range capsSpan.FindAllStringSubmatch(cells[0], -1) {
			switch {
			case strings.Contains(m[1], "<"):
				patterns = append(patterns, m[1])
			case strings.HasPrefix(m[1], "FLEETQ_"):
				doc[m[1]] = row
			default:
				parts = append(parts, m[1]) // DYNAMODB of FLEETQ_<SERVICE>_ENDPOINT
			}
		}
		for _, p := range patterns {
			for _, part := range parts {
				doc[regexp.MustCompile(`<[^>]*>`).ReplaceAllString(p, part)] = row
			}
		}
	}
	code := map[string]envRow{}
	for _, v := range vars {
		r := code[v.Name]
		for _, fn := range v.By {
			if !slices.Contains(r.by, string(fn)) {
				r.by = append(r.by, string(fn))
			}
		}
		slices.Sort(r.by)
		r.when = whenOf(v.When)
		code[v.Name] = r
	}
	var problems []string
	for name, c := range code {
		d, ok := doc[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s is not in the table", name))
		case !slices.Equal(c.by, d.by):
			problems = append(problems, fmt.Sprintf("%s is read by %s; the table says %s", name, strings.Join(c.by, ", "), strings.Join(d.by, ", ")))
		case c.when != d.when:
			problems = append(problems, fmt.Sprintf("%s is set %s; the table says %s", name, c.when, d.when))
		}
	}
	for name := range doc {
		if _, ok := code[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s is in the table, not in awsenv.Vars", name))
		}
	}
	slices.Sort(problems)
	return problems
}

// readers are the functions a "Read by" cell names: every function, or
// the names outside its parentheses.
func readers(cell string) []string {
	var by []string
	if strings.Contains(cell, "every function") {
		for _, fn := range awsenv.Functions {
			by = append(by, string(fn))
		}
	} else {
		names := cell
		for parenthesis.MatchString(names) {
			names = parenthesis.ReplaceAllString(names, "")
		}
		for n := range strings.SplitSeq(names, ",") {
			by = append(by, strings.TrimSpace(n))
		}
	}
	slices.Sort(by)
	return by
}

func stackSets(cell string) string {
	switch cell = strings.TrimSpace(cell); {
	case strings.HasPrefix(cell, "always"):
		return "always"
	case strings.HasPrefix(cell, "never"):
		return "never"
	}
	return "on a condition"
}

func whenOf(w awsenv.When) string {
	switch {
	case w == nil:
		return "never"
	case reflect.ValueOf(w).Pointer() == reflect.ValueOf(awsenv.Always).Pointer():
		return "always"
	}
	return "on a condition"
}
