package infra_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// A release's template must be one CloudFormation can apply in place to a
// stage of the previous release that holds data (docs/deploy.md,
// "Compatibility"; docs/data-model.md, "Changing the schema").
// testdata/release-<version>/<stage>.json keeps, for each shipped config,
// the part of that release's template an update can lose data through: the
// stateful resources by logical id with their types and fixed names, and
// the table's keys, attribute definitions and indexes.
// TestTemplateUpgradesInPlace compares today's synthesized templates with
// the newest release's and fails on a change that replaces or empties a
// stateful resource, unless testdata/accepted-changes.txt lists it with the
// documentation of its migration.
//
// At release time, before tagging vX.Y.Z, record that release's shapes with
// the store's fixtures (make release-fixtures VERSION=vX.Y.Z):
//
//	FLEETQ_RELEASE_FIXTURES=vX.Y.Z go test ./infra -run TestTemplateUpgradesInPlace -count=1
//
// and empty accepted-changes.txt: its migrations shipped with that release.

// upgradeStateful are the resource types whose replacement or removal
// loses what a stage holds (the queues hold accepted submissions).
var upgradeStateful = append(slices.Clone(statefulTypes), "AWS::SQS::Queue")

// templateShape is what of a template an in-place update must keep.
type templateShape struct {
	Resources map[string]resourceShape `json:"resources"`
}

type resourceShape struct {
	Type string `json:"type"`
	// Names are the fixed physical names the template gives it
	// (fixedNames), as JSON: a change replaces the resource.
	Names map[string]string `json:"names,omitempty"`
	// Tables only: keys as "<hash>+<range>", attribute types by name.
	KeySchema            string                `json:"key_schema,omitempty"`
	AttributeDefinitions map[string]string     `json:"attribute_definitions,omitempty"`
	GlobalIndexes        map[string]indexShape `json:"global_indexes,omitempty"`
	LocalIndexes         map[string]indexShape `json:"local_indexes,omitempty"`
	// FIFO queues cannot become standard ones, nor the reverse, in place.
	FIFO bool `json:"fifo,omitempty"`
}

// indexShape is an index's keys and projection; its attribute list sorted
// (the order changes nothing).
type indexShape struct {
	KeySchema        string   `json:"key_schema"`
	ProjectionType   string   `json:"projection_type"`
	NonKeyAttributes []string `json:"non_key_attributes,omitempty"`
}

// keySchema renders a KeySchema as "<hash>+<range>".
func keySchema(v any) string {
	list, _ := v.([]any)
	var hash, rng string
	for _, e := range list {
		m, _ := e.(map[string]any)
		switch m["KeyType"] {
		case "HASH":
			hash = fmt.Sprint(m["AttributeName"])
		case "RANGE":
			rng = fmt.Sprint(m["AttributeName"])
		}
	}
	if rng == "" {
		return hash
	}
	return hash + "+" + rng
}

func canonical(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}

// shapeOf trims a synthesized template to its templateShape.
func shapeOf(doc map[string]any) templateShape {
	shape := templateShape{Resources: map[string]resourceShape{}}
	resources, _ := doc["Resources"].(map[string]any)
	for id, r := range resources {
		res, _ := r.(map[string]any)
		typ, _ := res["Type"].(string)
		if !slices.Contains(upgradeStateful, typ) {
			continue
		}
		props, _ := res["Properties"].(map[string]any)
		rs := resourceShape{Type: typ}
		for _, p := range fixedNames {
			if v, ok := props[p]; ok {
				if rs.Names == nil {
					rs.Names = map[string]string{}
				}
				rs.Names[p] = string(canonical(v))
			}
		}
		if typ == "AWS::DynamoDB::Table" {
			rs.KeySchema = keySchema(props["KeySchema"])
			rs.AttributeDefinitions = map[string]string{}
			defs, _ := props["AttributeDefinitions"].([]any)
			for _, d := range defs {
				dm, _ := d.(map[string]any)
				rs.AttributeDefinitions[fmt.Sprint(dm["AttributeName"])] = fmt.Sprint(dm["AttributeType"])
			}
			rs.GlobalIndexes = indexShapes(props["GlobalSecondaryIndexes"])
			rs.LocalIndexes = indexShapes(props["LocalSecondaryIndexes"])
		}
		if typ == "AWS::SQS::Queue" && props["FifoQueue"] == true {
			rs.FIFO = true
		}
		shape.Resources[id] = rs
	}
	return shape
}

// indexShapes keeps each index's keys and projection, by name.
func indexShapes(v any) map[string]indexShape {
	list, _ := v.([]any)
	if len(list) == 0 {
		return nil
	}
	out := map[string]indexShape{}
	for _, ix := range list {
		m, _ := ix.(map[string]any)
		proj, _ := m["Projection"].(map[string]any)
		shape := indexShape{KeySchema: keySchema(m["KeySchema"]), ProjectionType: fmt.Sprint(proj["ProjectionType"])}
		if attrs, ok := proj["NonKeyAttributes"].([]any); ok {
			for _, a := range attrs {
				shape.NonKeyAttributes = append(shape.NonKeyAttributes, fmt.Sprint(a))
			}
			sort.Strings(shape.NonKeyAttributes)
		}
		out[fmt.Sprint(m["IndexName"])] = shape
	}
	return out
}

// indexChange words how an index changed ("" for not at all).
func indexChange(o, n indexShape) string {
	var parts []string
	if o.KeySchema != n.KeySchema {
		parts = append(parts, fmt.Sprintf("keys %s became %s", o.KeySchema, n.KeySchema))
	}
	if o.ProjectionType != n.ProjectionType {
		parts = append(parts, fmt.Sprintf("projection %s became %s", o.ProjectionType, n.ProjectionType))
	}
	var lost, gained []string
	for _, a := range o.NonKeyAttributes {
		if !slices.Contains(n.NonKeyAttributes, a) {
			lost = append(lost, a)
		}
	}
	for _, a := range n.NonKeyAttributes {
		if !slices.Contains(o.NonKeyAttributes, a) {
			gained = append(gained, a)
		}
	}
	if len(lost) > 0 {
		parts = append(parts, "projection lost "+strings.Join(lost, ", "))
	}
	if len(gained) > 0 {
		parts = append(parts, "projection gained "+strings.Join(gained, ", "))
	}
	return strings.Join(parts, "; ")
}

// upgradeChanges lists what an update from old to now would do that loses
// data or that CloudFormation refuses on a table with data, one line each,
// as accepted-changes.txt names them: "<resource>: <change>".
func upgradeChanges(old, now templateShape) []string {
	var out []string
	add := func(id, format string, args ...any) { out = append(out, id+": "+fmt.Sprintf(format, args...)) }
	for id, o := range old.Resources {
		n, ok := now.Resources[id]
		if !ok {
			add(id, "removed (%s): CloudFormation deletes it, or orphans it when retained", o.Type)
			continue
		}
		if n.Type != o.Type {
			add(id, "type changed from %s to %s", o.Type, n.Type)
			continue
		}
		for p, v := range o.Names {
			if n.Names[p] != v {
				add(id, "%s changed from %s to %s: the resource is replaced", p, v, orNone(n.Names[p]))
			}
		}
		for p, v := range n.Names {
			if _, ok := o.Names[p]; !ok {
				add(id, "%s set to %s: the resource is replaced", p, v)
			}
		}
		if o.FIFO != n.FIFO {
			add(id, "FifoQueue changed: the queue is replaced")
		}
		if o.Type != "AWS::DynamoDB::Table" {
			continue
		}
		if o.KeySchema != n.KeySchema {
			add(id, "key schema changed from %s to %s: the table is replaced", o.KeySchema, n.KeySchema)
		}
		for a, t := range o.AttributeDefinitions {
			if nt, ok := n.AttributeDefinitions[a]; ok && nt != t {
				add(id, "attribute %s changed type from %s to %s", a, t, nt)
			}
		}
		if !reflect.DeepEqual(o.LocalIndexes, n.LocalIndexes) {
			add(id, "local secondary indexes changed: they are fixed at the table's creation, the table is replaced")
		}
		var added []string
		for name, ix := range o.GlobalIndexes {
			nix, ok := n.GlobalIndexes[name]
			switch {
			case !ok:
				add(id, "index %s removed: the previous release still reads it during the deploy", name)
			case indexChange(ix, nix) != "":
				add(id, "index %s changed (%s): an index's keys and projection cannot change in place", name, indexChange(ix, nix))
			}
		}
		for name := range n.GlobalIndexes {
			if _, ok := o.GlobalIndexes[name]; !ok {
				added = append(added, name)
			}
		}
		if len(added) > 1 {
			sort.Strings(added)
			add(id, "indexes %s added in one update: CloudFormation adds one global secondary index per update", strings.Join(added, ", "))
		}
	}
	sort.Strings(out)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// acceptedChanges reads testdata/accepted-changes.txt: "<stage>: <change>"
// lines as upgradeChanges words them, each followed by a line
// "  see <docs file>#<heading anchor>" naming its migration.
func acceptedChanges(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "accepted-changes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var last string
	for i, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "  see "):
			if last == "" || out[last] != "" {
				t.Fatalf("accepted-changes.txt:%d: a \"see\" line belongs under one change", i+1)
			}
			out[last] = strings.TrimPrefix(line, "  see ")
		default:
			if last != "" && out[last] == "" {
				t.Fatalf("accepted-changes.txt: %q names no migration (\"  see docs/<file>.md#<section>\")", last)
			}
			last = line
			out[last] = ""
		}
	}
	if last != "" && out[last] == "" {
		t.Fatalf("accepted-changes.txt: %q names no migration (\"  see docs/<file>.md#<section>\")", last)
	}
	return out
}

// docAnchors are the GitHub anchors of a markdown file's headings.
func docAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	out := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.TrimLeft(h, "#")
			a := drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), "")
			out[strings.ReplaceAll(a, " ", "-")] = true
		}
	}
	return out
}

// checkUpgrade is the rule: every change needs an accepted entry whose
// documentation exists; an entry no change needs any more is stale.
func checkUpgrade(t *testing.T, stage string, old, now templateShape, accepted map[string]string, used map[string]bool) []string {
	t.Helper()
	var problems []string
	for _, c := range upgradeChanges(old, now) {
		key := stage + ": " + c
		see, ok := accepted[key]
		if !ok {
			problems = append(problems, key)
			continue
		}
		used[key] = true
		file, anchor, _ := strings.Cut(see, "#")
		if !docAnchors(t, file)[anchor] {
			problems = append(problems, key+" (its migration, "+see+", is no heading of "+file+")")
		}
	}
	return problems
}

var releaseDir = regexp.MustCompile(`^release-v\d+\.\d+\.\d+$`)

// lastRelease is the newest testdata/release-* directory.
func lastRelease(t *testing.T) string {
	t.Helper()
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && releaseDir.MatchString(e.Name()) {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no testdata/release-v*: the last release's template shapes are missing")
	}
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[i], dirs[j]) })
	return filepath.Join("testdata", dirs[len(dirs)-1])
}

// versionLess orders release-vX.Y.Z names numerically.
func versionLess(a, b string) bool {
	num := func(s string) [3]int {
		var v [3]int
		_, _ = fmt.Sscanf(strings.TrimPrefix(s, "release-v"), "%d.%d.%d", &v[0], &v[1], &v[2])
		return v
	}
	va, vb := num(a), num(b)
	for i := range va {
		if va[i] != vb[i] {
			return va[i] < vb[i]
		}
	}
	return false
}

func shippedStages(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../config/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped configs: %v", err)
	}
	var stages []string
	for _, f := range files {
		stages = append(stages, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	return stages
}

func TestTemplateUpgradesInPlace(t *testing.T) {
	if version := os.Getenv("FLEETQ_RELEASE_FIXTURES"); version != "" {
		writeReleaseShapes(t, version)
		return
	}
	dir := lastRelease(t)
	accepted := acceptedChanges(t)
	used := map[string]bool{}
	for _, stage := range shippedStages(t) {
		raw, err := os.ReadFile(filepath.Join(dir, stage+".json"))
		if os.IsNotExist(err) {
			t.Logf("%s: new since %s, nothing to upgrade", stage, dir)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var old templateShape
		if err := json.Unmarshal(raw, &old); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		now := shapeOf(synth(t, stage).json)
		for _, p := range checkUpgrade(t, stage, old, now, accepted, used) {
			t.Errorf("upgrading %s from %s: %s\n  CloudFormation cannot apply this in place to a stage with data. Keep the old shape, or follow docs/data-model.md, \"Changing the schema\", and list the change with its migration in infra/testdata/accepted-changes.txt", stage, dir, p)
		}
	}
	for key := range accepted {
		if !used[key] {
			t.Errorf("accepted-changes.txt lists %q, which no update from %s makes any more: remove it", key, dir)
		}
	}
}

func writeReleaseShapes(t *testing.T, version string) {
	t.Helper()
	dir := filepath.Join("testdata", "release-"+version)
	if !releaseDir.MatchString(filepath.Base(dir)) {
		t.Fatalf("FLEETQ_RELEASE_FIXTURES=%q: a release version is vMAJOR.MINOR.PATCH", version)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s exists: a release's shapes are never rewritten", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, stage := range shippedStages(t) {
		raw, err := json.MarshalIndent(shapeOf(synth(t, stage).json), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, stage+".json"), append(raw, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote the template shapes of %s", dir)
}

// The rule fails what it must: each mutation of a recorded shape is one
// CloudFormation cannot apply in place to a stage with data, and an entry
// in the accepted changes lets it through only with a migration documented
// under a heading that exists.
func TestTemplateUpgradeRuleCatchesReplacements(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(lastRelease(t), "prod.json"))
	if err != nil {
		t.Fatal(err)
	}
	load := func() templateShape {
		var s templateShape
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := load()
	table := ""
	for id, r := range base.Resources {
		if r.Type == "AWS::DynamoDB::Table" {
			table = id
		}
	}
	if table == "" || len(base.Resources[table].GlobalIndexes) == 0 {
		t.Fatalf("the recorded prod shape has no table with indexes: %s", raw)
	}
	if got := upgradeChanges(base, load()); len(got) != 0 {
		t.Fatalf("an unchanged template has changes: %v", got)
	}
	editTable := func(f func(*resourceShape)) func(*templateShape) {
		return func(s *templateShape) { r := s.Resources[table]; f(&r); s.Resources[table] = r }
	}
	cases := []struct {
		name   string
		mutate func(*templateShape)
		want   string
	}{
		{"projection attribute removed", editTable(func(r *resourceShape) {
			ix := r.GlobalIndexes["by-state"]
			ix.NonKeyAttributes = slices.DeleteFunc(slices.Clone(ix.NonKeyAttributes), func(a string) bool { return a == "agent_version" })
			r.GlobalIndexes["by-state"] = ix
		}), "index by-state changed (projection lost agent_version)"},
		{"projection attribute added", editTable(func(r *resourceShape) {
			ix := r.GlobalIndexes["by-instance"]
			ix.NonKeyAttributes = append(slices.Clone(ix.NonKeyAttributes), "az")
			r.GlobalIndexes["by-instance"] = ix
		}), "index by-instance changed (projection gained az)"},
		{"projection type", editTable(func(r *resourceShape) {
			r.GlobalIndexes["by-state"] = indexShape{KeySchema: r.GlobalIndexes["by-state"].KeySchema, ProjectionType: "ALL"}
		}), "projection INCLUDE became ALL"},
		{"index key schema", editTable(func(r *resourceShape) {
			ix := r.GlobalIndexes["by-instance"]
			ix.KeySchema = "GSI2PK+GSI9SK"
			r.GlobalIndexes["by-instance"] = ix
		}), "index by-instance changed (keys GSI2PK+GSI2SK became GSI2PK+GSI9SK)"},
		{"index removed", editTable(func(r *resourceShape) { delete(r.GlobalIndexes, "by-instance") }), "index by-instance removed"},
		{"two indexes added", editTable(func(r *resourceShape) {
			r.GlobalIndexes["by-a"] = r.GlobalIndexes["by-state"]
			r.GlobalIndexes["by-b"] = r.GlobalIndexes["by-state"]
		}), "indexes by-a, by-b added in one update"},
		{"table key schema", editTable(func(r *resourceShape) { r.KeySchema = "PK+SK2" }), "key schema changed from PK+SK to PK+SK2"},
		{"local index", editTable(func(r *resourceShape) {
			r.LocalIndexes = map[string]indexShape{"by-time": {KeySchema: "PK+T", ProjectionType: "KEYS_ONLY"}}
		}), "local secondary indexes changed"},
		{"fixed name", editTable(func(r *resourceShape) { r.Names["TableName"] = `"fleetq-prod-v2"` }), "TableName changed"},
		{"logical id", func(s *templateShape) { s.Resources[table+"V2"] = s.Resources[table]; delete(s.Resources, table) }, "removed (AWS::DynamoDB::Table)"},
		{"attribute type", editTable(func(r *resourceShape) { r.AttributeDefinitions["PK"] = "N" }), "attribute PK changed type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := load()
			c.mutate(&now)
			changes := upgradeChanges(base, now)
			if len(changes) != 1 || !strings.Contains(changes[0], c.want) {
				t.Fatalf("changes = %q, want one saying %q", changes, c.want)
			}
			problems := checkUpgrade(t, "prod", base, now, map[string]string{}, map[string]bool{})
			if len(problems) != 1 {
				t.Fatalf("not accepted, the rule answers %q; want the change refused", problems)
			}
			key := "prod: " + changes[0]
			if p := checkUpgrade(t, "prod", base, now, map[string]string{key: "docs/data-model.md#no-such-section"}, map[string]bool{}); len(p) != 1 {
				t.Fatalf("accepted with a migration under no heading, the rule answers %q; want it refused", p)
			}
			if p := checkUpgrade(t, "prod", base, now, map[string]string{key: "docs/data-model.md#changing-the-schema"}, map[string]bool{}); len(p) != 0 {
				t.Fatalf("accepted with its migration documented, the rule still refuses: %q", p)
			}
		})
	}
	// One new index, with its key attributes defined, is an in-place update.
	now := load()
	editTable(func(r *resourceShape) {
		r.GlobalIndexes["by-tenant"] = r.GlobalIndexes["by-state"]
		r.AttributeDefinitions["GSI3PK"] = "S"
	})(&now)
	now.Resources["NewBucket"] = resourceShape{Type: "AWS::S3::Bucket"}
	if got := upgradeChanges(base, now); len(got) != 0 {
		t.Fatalf("adding one index and a bucket: changes %q, want none", got)
	}
}
