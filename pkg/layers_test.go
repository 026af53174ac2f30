// Package pkg_test keeps the layout honest: each group of packages under
// pkg/ may import only the groups below it (docs/architecture.md).
package pkg_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/fleetq/fleetq/"

// allowed lists, for each group, the groups its non-test code may import.
var allowed = map[string][]string{
	"lib":     {"lib"},
	"domain":  {"domain", "lib"},
	"aws":     {"aws", "domain", "lib"},
	"service": {"service", "aws", "domain", "lib"},
	"tools":   {"tools", "domain", "lib"},
	"local":   {"local", "service", "aws", "domain", "lib"},
}

func TestGroupsImportOnlyTheGroupsBelow(t *testing.T) {
	fset := token.NewFileSet()
	seen := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		group := strings.Split(filepath.ToSlash(path), "/")[0]
		ok, known := allowed[group]
		if !known {
			t.Errorf("%s: pkg/%s is not a group of docs/architecture.md", path, group)
			return nil
		}
		seen[group] = true
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			rest, ours := strings.CutPrefix(imp, module+"pkg/")
			if !ours {
				// The built-in fleet configs (config/) are data any group may embed.
				if strings.HasPrefix(imp, module) && imp != module+"config" {
					t.Errorf("%s imports %s: pkg/ must not depend on the rest of the module", path, imp)
				}
				continue
			}
			to := strings.Split(rest, "/")[0]
			fine := false
			for _, g := range ok {
				fine = fine || g == to
			}
			if !fine {
				t.Errorf("%s (pkg/%s) imports %s: pkg/%s may import only %v", path, group, imp, group, ok)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for g := range allowed {
		if !seen[g] {
			t.Errorf("no package in pkg/%s", g)
		}
	}
	if _, err := os.Stat("../docs/architecture.md"); err != nil {
		t.Errorf("the layout's map is missing: %v", err)
	}
}

// storeImporters lists the only packages under pkg/service, tests
// included, that may import the DynamoDB adapter: the composition root,
// which builds the store and hands it to each service as the small
// interface the service declares. Services and their tests name the
// store's records and errors from the domain (docs/architecture.md, "Who
// depends on whom").
var storeImporters = []string{"service/system"}

func TestOnlyTheCompositionRootImportsTheStore(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("service", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		for _, spec := range f.Imports {
			if imp, _ := strconv.Unquote(spec.Path.Value); imp == module+"pkg/aws/store" && !slices.Contains(storeImporters, dir) {
				t.Errorf("%s imports pkg/aws/store: only %v may; name its records and errors from pkg/domain and take the store as an interface the package declares", path, storeImporters)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deps answers, for each package pattern matches, every package it links
// (go list's Deps) as make build builds it: for linux/amd64, static, with
// tags.
func deps(t *testing.T, tags, pattern string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", tags, "-f", `{{.ImportPath}} {{join .Deps " "}}`, pattern)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list %s: %v\n%s", pattern, err, stderr)
	}
	all := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		all[f[0]] = f[1:]
	}
	return all
}

// linked is which of prefixes (a package, or a module or folder of
// packages) deps links: a prefix is linked when some dependency is it or
// lies under it.
func linked(deps []string, prefixes ...string) []string {
	var got []string
	for _, p := range prefixes {
		for _, d := range deps {
			if d == p || strings.HasPrefix(d, p+"/") {
				got = append(got, p)
				break
			}
		}
	}
	return got
}

// What no shipped binary links: the dev stack and the embedded AWS servers,
// the tools (the simulator), the CDK app and its runtime, the test-only
// emulators and browser.
var devOnly = []string{module + "pkg/local", module + "pkg/tools", module + "infra",
	"github.com/aws/aws-cdk-go", "github.com/aws/jsii-runtime-go", "github.com/aws/constructs-go",
	"github.com/truora/minidyn", "github.com/Admiral-Piett/goaws", "github.com/johannesboyne/gofakes3", "github.com/chromedp"}

// The agent every instance downloads at boot (make build: cmd/fleetq with
// the agent tag, the worker and version commands only) links the agent and
// what it stands on, none of the control plane: no store, no services but
// the agent, no Lambda runtime, no dev stack.
func TestAgentLinksOnlyTheAgent(t *testing.T) {
	t.Parallel()
	const agent = module + "cmd/fleetq"
	cmd := exec.Command("go", "list", "-tags", "agent", "-f", `{{join .GoFiles " "}}`, "../cmd/fleetq")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, []string{"main.go", "version.go", "worker.go"}) {
		t.Errorf("the agent's build of cmd/fleetq compiles %v, want main.go, version.go and worker.go only (a command of the CLI alone is built with the constraint //go:build !agent)", got)
	}
	all := deps(t, "agent", "../cmd/fleetq")[agent]
	if len(all) == 0 {
		t.Fatal("go list found no dependencies of the agent")
	}
	for _, p := range linked(all, devOnly...) {
		t.Errorf("the agent links %s", p)
	}
	for _, p := range linked(all, "github.com/aws/aws-lambda-go", "github.com/awslabs/aws-lambda-go-api-proxy",
		"github.com/aws/aws-sdk-go-v2/service/dynamodb", "github.com/aws/aws-sdk-go-v2/service/ec2", "github.com/aws/aws-sdk-go-v2/service/autoscaling") {
		t.Errorf("the agent links %s", p)
	}
	// Of fleetq, the agent and attested registration, over the domain and
	// the libraries.
	for _, p := range all {
		rest, ours := strings.CutPrefix(p, module)
		if ours && rest != "config" && len(linked([]string{rest}, "pkg/domain", "pkg/lib", "pkg/service/agent", "pkg/aws/attest")) == 0 {
			t.Errorf("the agent links %s", p)
		}
	}
}

// Each Lambda bootstrap (functions/<name>) links the services it calls and
// none of the others': the functions do not share one composition root.
func TestFunctionsLinkOnlyWhatTheyCall(t *testing.T) {
	t.Parallel()
	svc := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, module+"pkg/service/"+n)
		}
		return out
	}
	const sdk = "github.com/aws/aws-sdk-go-v2/service/"
	api := append(svc("api", "console", "system/apifn"), sdk+"s3", sdk+"sqs", "github.com/awslabs/aws-lambda-go-api-proxy/httpadapter", "html/template")
	notFor := map[string][]string{
		"api": slices.Concat(svc("dispatch", "interruption", "agent", "system/dispatchfn", "system/scalerfn", "system/interruptionfn"), []string{sdk + "ec2", module + "pkg/aws/spotprice"}),
		// The wait route's function is the API's handler on a function of its own.
		"wait": slices.Concat(svc("dispatch", "interruption", "agent", "system/dispatchfn", "system/scalerfn", "system/interruptionfn"), []string{sdk + "ec2", module + "pkg/aws/spotprice"}),
		// Dispatch links EC2's client for one call: its wake starts the
		// stopped instances of the fleets' Spot pools on enqueue
		// (system/spotpools, the scaler's constructor, over pkg/aws/ec2pool),
		// not at the next tick. It reads no Spot price.
		"dispatch":     slices.Concat(api, svc("interruption", "agent", "system/scalerfn", "system/interruptionfn"), []string{module + "pkg/aws/spotprice", module + "pkg/aws/auth"}),
		"scaler":       slices.Concat(api, svc("dispatch", "interruption", "agent", "system/dispatchfn", "system/interruptionfn")),
		"interruption": slices.Concat(api, svc("dispatch", "agent", "system/dispatchfn", "system/scalerfn"), []string{sdk + "ec2", module + "pkg/aws/auth"}),
	}
	all := deps(t, "lambda.norpc", "../functions/...")
	for fn, not := range notFor {
		d := all[module+"functions/"+fn]
		if len(d) == 0 {
			t.Errorf("go list found no function %s", fn)
			continue
		}
		for _, p := range linked(d, slices.Concat(not, devOnly)...) {
			t.Errorf("the %s function links %s", fn, p)
		}
	}
	if len(all) != len(notFor) {
		t.Errorf("functions/ holds %d functions, the test knows %d", len(all), len(notFor))
	}
}
