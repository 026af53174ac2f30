package fleetconfig

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The config file is read twice: first as a YAML node tree, which checkNode
// walks beside the config types to find what the decoder would refuse
// (an unknown field, a value of the wrong kind) with its line and its
// place in the file, in words a person can act on; then decoded. The
// decoder's own messages name Go types, so they are never shown.

// kindOf says what a value of type t is written as, for messages.
func kindOf(t reflect.Type) string {
	if t == reflect.TypeFor[Duration]() {
		return "a duration (write e.g. 90s, 15m, 1h30m)"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "text"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping of fields"
	}
	return "a value"
}

// yamlFields are the fields a struct type reads, by their YAML names, in
// the order the type declares them.
func yamlFields(t reflect.Type) ([]string, map[string]reflect.Type) {
	var names []string
	types := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		names = append(names, name)
		types[name] = f.Type
	}
	return names, types
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// checkNode adds a problem for each place under n that a value of type t
// cannot be decoded from: path is n's place in the file (fleets[0].slug).
func checkNode(k *checker, n *yaml.Node, t reflect.Type, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isNull(n) || t.Kind() == reflect.Interface {
		return
	}
	field := path
	if field == "" {
		field = "(file)"
	}
	wrong := func() { k.addAt(n.Line, field, "must be %s", kindOf(t)) }
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) ||
		reflect.PointerTo(t).Implements(reflect.TypeFor[obsoleteUnmarshaler]()) {
		if n.Kind != yaml.ScalarNode {
			wrong()
			return
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			k.addAt(n.Line, field, "%q is not %s", n.Value, kindOf(t))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			wrong()
			return
		}
		names, types := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			at := join(path, key.Value)
			ft, known := types[key.Value]
			if !known {
				if near := nearest(key.Value, names); near != "" {
					k.addAt(key.Line, at, "unknown field; did you mean %s?", near)
				} else {
					k.addAt(key.Line, at, "unknown field (the fields here: %s)", strings.Join(names, ", "))
				}
				continue
			}
			checkNode(k, value, ft, at)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			wrong()
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkNode(k, n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			wrong()
			return
		}
		for i, item := range n.Content {
			checkNode(k, item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		if n.Kind != yaml.ScalarNode {
			wrong()
			return
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			k.addAt(n.Line, field, "%q is not %s", n.Value, kindOf(t))
		}
	}
}

// obsoleteUnmarshaler is the older form of yaml.Unmarshaler that Duration
// implements.
type obsoleteUnmarshaler interface {
	UnmarshalYAML(unmarshal func(any) error) error
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// lineOf is the line of the place a problem names (fleets[0].max_instances)
// in the file's node tree, or of the nearest enclosing place the file
// has; 0 when the file has none of it.
func lineOf(root *yaml.Node, field string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, part := range strings.FieldsFunc(field, func(r rune) bool { return r == '.' || r == '[' }) {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		var next *yaml.Node
		if idx, isIndex := strings.CutSuffix(part, "]"); isIndex {
			i, err := strconv.Atoi(idx)
			if err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return line
			}
			next = n.Content[i]
			line = next.Line
		} else {
			if n.Kind != yaml.MappingNode {
				return line
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					line, next = n.Content[i].Line, n.Content[i+1]
					break
				}
			}
			if next == nil {
				return line
			}
		}
		n = next
	}
	return line
}

// nearest is the field of names closest to name when it is near enough
// to be a slip (a letter or two, a '-' for a '_', a plural), else "".
func nearest(name string, names []string) string {
	best, bestD := "", -1
	for _, c := range names {
		d := editDistance(strings.ReplaceAll(strings.ToLower(name), "-", "_"), c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (optimal string
// alignment): insertions, deletions, substitutions and swaps of two
// neighbouring letters each count one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
