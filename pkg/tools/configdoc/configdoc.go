package configdoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// Field is one setting of the config file.
type Field struct {
	// Path is the field's place in the file: fleets[].retry.max_attempts.
	Path string
	// Type is the field's type as the reference names it.
	Type string
	// Default is the value Parse fills in when the field is left out, as
	// written in YAML; empty when there is none.
	Default string
	// Doc is the field's doc comment, with Go field names replaced by
	// their YAML keys.
	Doc string

	t       reflect.Type
	deflt   any
	hasDflt bool
}

// minimal is the smallest valid config: the fields it sets have no
// default; every other field's default is read from what Parse fills in.
const minimal = `stage: x
region: us-east-1
fleets:
  - slug: f
    workflows: [w]
    instance_types: [g5.xlarge]
    ami_ssm_parameter: /p
`

var durationType = reflect.TypeOf(fleetconfig.Duration(0))

// docs reads the doc comment of every struct field in the Go files of src
// (test files left out): type name → field name → text.
func docs(src fs.FS) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	fset := token.NewFileSet()
	names, err := fs.Glob(src, "*.go")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		data, err := fs.ReadFile(src, n)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, n, data, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(node ast.Node) bool {
			ts, ok := node.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			m := map[string]string{}
			prev := ""
			for _, fl := range st.Fields.List {
				text := strings.Join(strings.Fields(fl.Doc.Text()+" "+fl.Comment.Text()), " ")
				for _, id := range fl.Names {
					if text == "" && regexp.MustCompile(`\b`+id.Name+`\b`).MatchString(prev) {
						// "From and To are ...": one comment for both.
						text = prev
					}
					m[id.Name] = text
				}
				prev = text
			}
			out[ts.Name.Name] = m
			return false
		})
	}
	return out, nil
}

// Fields lists every field of the config file, in the order of the Go
// types, reading doc comments from the fleetconfig package's source in src.
// A field without a doc comment is an error: the reference must say what
// each setting means.
func Fields(src fs.FS) ([]Field, error) {
	d, err := docs(src)
	if err != nil {
		return nil, err
	}
	cfg, err := fleetconfig.Parse("minimal", []byte(minimal))
	if err != nil {
		return nil, fmt.Errorf("the minimal config does not parse: %w", err)
	}
	set := map[string]bool{"stage": true, "region": true, "fleets": true, "fleets[].slug": true,
		"fleets[].workflows": true, "fleets[].instance_types": true, "fleets[].ami_ssm_parameter": true}
	var out []Field
	var missing []string
	var walk func(t reflect.Type, v reflect.Value, prefix string)
	walk = func(t reflect.Type, v reflect.Value, prefix string) {
		yamlNames := map[string]string{}
		for i := 0; i < t.NumField(); i++ {
			if key := yamlKey(t.Field(i)); key != "" {
				yamlNames[t.Field(i).Name] = key
			}
		}
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			key := yamlKey(sf)
			if key == "" {
				continue
			}
			path := prefix + key
			doc := d[t.Name()][sf.Name]
			if doc == "" {
				missing = append(missing, t.Name()+"."+sf.Name)
			}
			f := Field{Path: path, Type: typeName(sf.Type), Doc: yamlize(doc, yamlNames), t: sf.Type}
			var fv reflect.Value
			if v.IsValid() {
				fv = v.Field(i)
				if !set[path] {
					f.deflt, f.hasDflt = value(fv), true
					f.Default = display(fv)
				}
			}
			out = append(out, f)
			switch {
			case sf.Type.Kind() == reflect.Struct && sf.Type != durationType:
				walk(sf.Type, fv, path+".")
			case sf.Type.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Struct:
				var ev reflect.Value
				if fv.IsValid() && fv.Len() > 0 {
					ev = fv.Index(0)
				}
				walk(sf.Type.Elem(), ev, path+"[].")
			}
		}
	}
	walk(reflect.TypeOf(*cfg), reflect.ValueOf(*cfg), "")
	if len(missing) > 0 {
		return nil, fmt.Errorf("fields without a doc comment: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

func yamlKey(sf reflect.StructField) string {
	if !sf.IsExported() {
		return ""
	}
	key, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	if key == "-" {
		return ""
	}
	return key
}

// yamlize writes the struct's Go field names in a doc comment as their
// YAML keys, except in quotes: a quoted section title (docs/scaling.md,
// "Warm capacity") is another document's words.
func yamlize(doc string, names map[string]string) string {
	goNames := make([]string, 0, len(names))
	for n := range names {
		goNames = append(goNames, regexp.QuoteMeta(n))
	}
	if len(goNames) == 0 {
		return doc
	}
	sort.Sort(sort.Reverse(sort.StringSlice(goNames)))
	re := regexp.MustCompile(`\b(` + strings.Join(goNames, "|") + `)\b`)
	parts := strings.Split(doc, `"`)
	for i := 0; i < len(parts); i += 2 {
		parts[i] = re.ReplaceAllStringFunc(parts[i], func(n string) string { return "`" + names[n] + "`" })
	}
	return strings.Join(parts, `"`)
}

func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.Slice:
		return "list of " + typeName(t.Elem())
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Interface:
		return "object"
	case t.Kind() == reflect.Map:
		return "map of " + typeName(t.Elem())
	case t.Kind() == reflect.Struct:
		return "object"
	case t.Kind() == reflect.Int:
		return "integer"
	case t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() == reflect.Bool:
		return "boolean"
	}
	return t.Kind().String()
}

// compact writes a duration as a person would: 2m, 1h30m, 720h.
func compact(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// value is a field's value as JSON Schema's default holds it.
func value(v reflect.Value) any {
	switch {
	case v.Type() == durationType:
		return compact(time.Duration(v.Int()))
	case v.Kind() == reflect.Slice:
		if v.Len() == 0 {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = value(v.Index(i))
		}
		return out
	case v.Kind() == reflect.Struct, v.Kind() == reflect.Map:
		return nil
	}
	return v.Interface()
}

// display is a field's default as the Markdown table shows it.
func display(v reflect.Value) string {
	switch x := value(v).(type) {
	case nil:
		return ""
	case string:
		if x == "" {
			return ""
		}
		return "`" + x + "`"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmt.Sprint(e)
		}
		return "`[" + strings.Join(parts, ", ") + "]`"
	default:
		return "`" + fmt.Sprint(x) + "`"
	}
}

// Markdown is docs/config.md.
func Markdown(fields []Field) []byte {
	var b bytes.Buffer
	b.WriteString(`# Fleet config reference

<!-- Written by pkg/tools/configdoc from pkg/domain/fleetconfig; do not edit: change the doc comments
and run go generate ./pkg/tools/configdoc. -->

One YAML file per stage (` + "`config/<stage>.yaml`" + `, built into the binaries, or ` + "`--config`" + `). Unknown
fields are errors, durations are Go durations (` + "`90s`, `15m`, `1h30m`" + `) or whole seconds, and every
problem is reported with its field. A default is what a field left out becomes; a field without one is
empty (or off) unless the meaning says otherwise. ` + "`stage`" + ` and at least one fleet are required; each fleet
needs its ` + "`slug`, `instance_types`, and `ami_id` or `ami_ssm_parameter`" + `.

Editors complete and check the files with the JSON Schema ` + "[`config/fleetq.schema.json`](../config/fleetq.schema.json)" + `:
with the YAML language server, put this first line in a config file:

    # yaml-language-server: $schema=fleetq.schema.json

| Field | Type | Default | Meaning |
|---|---|---|---|
`)
	for _, f := range fields {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Path, f.Type, f.Default, strings.ReplaceAll(f.Doc, "|", `\|`))
	}
	return b.Bytes()
}

// Schema is config/fleetq.schema.json: a JSON Schema (2020-12) of the file.
func Schema(fields []Field) ([]byte, error) {
	root := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"title":   "fleetq stage configuration",
		"description": "The fleet config of one fleetq stage (docs/config.md). Written by pkg/tools/configdoc " +
			"from pkg/domain/fleetconfig; fleetq validates the file further when it loads it.",
		"type": "object", "additionalProperties": false, "properties": map[string]any{},
	}
	objects := map[string]map[string]any{"": root}
	for _, f := range fields {
		parentPath, key := "", f.Path
		if i := strings.LastIndex(f.Path, "."); i >= 0 {
			parentPath, key = f.Path[:i], f.Path[i+1:]
		}
		parent := objects[strings.TrimSuffix(parentPath, "[]")]
		if parent == nil {
			return nil, fmt.Errorf("%s: no parent object", f.Path)
		}
		s := schemaOf(f.t)
		s["description"] = f.Doc
		if f.hasDflt && f.deflt != nil && f.deflt != "" {
			s["default"] = f.deflt
		}
		parent["properties"].(map[string]any)[key] = s
		switch {
		case f.t.Kind() == reflect.Struct && f.t != durationType:
			objects[f.Path] = s
		case f.t.Kind() == reflect.Slice && f.t.Elem().Kind() == reflect.Struct:
			objects[f.Path] = s["items"].(map[string]any)
		}
	}
	out, err := json.MarshalIndent(root, "", "  ")
	return append(out, '\n'), err
}

func schemaOf(t reflect.Type) map[string]any {
	switch {
	case t == durationType:
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "pattern": `^-?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`},
			map[string]any{"type": "integer", "minimum": 0},
		}}
	case t.Kind() == reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Interface:
		return map[string]any{"type": "object"} // any JSON object
	case t.Kind() == reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case t.Kind() == reflect.Struct:
		return map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{}}
	case t.Kind() == reflect.Int:
		return map[string]any{"type": "integer"}
	case t.Kind() == reflect.Float64:
		return map[string]any{"type": "number"}
	case t.Kind() == reflect.Bool:
		return map[string]any{"type": "boolean"}
	}
	return map[string]any{"type": "string"}
}
