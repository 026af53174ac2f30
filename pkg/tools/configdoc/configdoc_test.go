package configdoc_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/tools/configdoc"
)

var update = flag.Bool("update", false, "rewrite docs/config.md and config/fleetq.schema.json")

const (
	root       = "../../.."
	markdown   = root + "/docs/config.md"
	schemaFile = root + "/config/fleetq.schema.json"
)

func generate(t *testing.T) ([]configdoc.Field, []byte, []byte) {
	t.Helper()
	fields, err := configdoc.Fields(os.DirFS(root + "/pkg/domain/fleetconfig"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := configdoc.Schema(fields)
	if err != nil {
		t.Fatal(err)
	}
	return fields, configdoc.Markdown(fields), schema
}

// TestCommittedReferenceIsCurrent fails when the config types changed and
// the reference was not regenerated (go generate ./pkg/tools/configdoc).
func TestCommittedReferenceIsCurrent(t *testing.T) {
	_, md, schema := generate(t)
	for path, want := range map[string][]byte{markdown: md, schemaFile: schema} {
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./pkg/tools/configdoc", filepath.Clean(path))
		}
	}
}

func TestDefaultsAreWhatParseFillsIn(t *testing.T) {
	fields, _, _ := generate(t)
	byPath := map[string]configdoc.Field{}
	for _, f := range fields {
		byPath[f.Path] = f
		if f.Doc == "" {
			t.Errorf("%s has no meaning", f.Path)
		}
	}
	for path, want := range map[string]string{
		"fleets[].max_instances":     "`10`",
		"fleets[].idle_window":       "`15m`",
		"fleets[].retry.backoff":     "`[2m, 10m, 30m]`",
		"fleets[].agent.comfyui_url": "`" + fleetconfig.DefaultComfyUIURL + "`",
		"job_retention":              "`720h`",
		"network.vpc_cidr":           "`10.80.0.0/16`",
		"stage":                      "",
		"fleets[].slug":              "",
	} {
		f, ok := byPath[path]
		if !ok {
			t.Errorf("no field %s", path)
			continue
		}
		if f.Default != want {
			t.Errorf("%s: default %q, want %q", path, f.Default, want)
		}
	}
	if d := byPath["fleets[].max_instances"].Doc; !strings.Contains(d, "most instances") {
		t.Errorf("max_instances' meaning is not its doc comment: %q", d)
	}
	if d := byPath["fleets[].ami_id"].Doc; !strings.Contains(d, "`ami_ssm_parameter`") {
		t.Errorf("Go field names in the meaning are not written as YAML keys: %q", d)
	}
}

// TestSchemaKnowsEveryKeyOfTheShippedConfigs walks each key of config/*.yaml
// down the schema's properties: a key the schema lacks would be flagged by
// editors on a valid file.
func TestSchemaKnowsEveryKeyOfTheShippedConfigs(t *testing.T) {
	_, _, raw := generate(t)
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(root + "/config/*.yaml")
	if len(files) == 0 {
		t.Fatal("no shipped configs")
	}
	var walk func(file, at string, n *yaml.Node, s map[string]any)
	walk = func(file, at string, n *yaml.Node, s map[string]any) {
		switch n.Kind {
		case yaml.MappingNode:
			props, _ := s["properties"].(map[string]any)
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i].Value
				sub, ok := props[key].(map[string]any)
				if !ok {
					t.Errorf("%s: %s%s is not in the schema", file, at, key)
					continue
				}
				walk(file, at+key+".", n.Content[i+1], sub)
			}
		case yaml.SequenceNode:
			items, _ := s["items"].(map[string]any)
			for _, c := range n.Content {
				walk(file, strings.TrimSuffix(at, ".")+"[].", c, items)
			}
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		walk(filepath.Base(f), "", doc.Content[0], schema)
	}
}
