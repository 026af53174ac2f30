// Package pkg_test keeps the layout honest: each group of packages under
// pkg/ may import only the groups below it (docs/architecture.md).
package pkg_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
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
