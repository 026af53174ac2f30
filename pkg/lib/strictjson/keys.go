package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
)

// errStop ends a key walk at malformed JSON; the decoder's own error
// describes it.
var errStop = errors.New("stop")

// MaxDepth is how deeply a field's value may nest objects and arrays, the
// value of a top-level field counting as the first level: DynamoDB's limit
// for a document. The bound also keeps the walk below, and the decoder
// after it, from spending more on a body than its size: a body of nothing
// but brackets is refused at the limit's depth.
const MaxDepth = 32

// checkKeys walks every object in data and refuses a key that appears twice
// in one object (parsers disagree on which one wins), a key that matches a
// field of the target only when case is ignored (encoding/json would take
// it, another parser would not), and nesting past MaxDepth. t is the type
// the value decodes into; nil (a json.RawMessage, an interface) still gets
// the duplicate check.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{dec: dec, limit: MaxDepth}
	err := w.walk(t)
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

// walker keeps the path to the value it is in as a stack of segments, so a
// level costs the same however deep it is; the path is spelled out only
// for an error.
type walker struct {
	dec   *json.Decoder
	limit int
	path  []segment
}

// segment is one step of a path: an object's key, or an array's index
// when key is unset.
type segment struct {
	key   string
	index int
	isKey bool
}

func (w *walker) walk(t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage || (t != nil && t.Kind() == reflect.Interface) {
		t = nil
	}
	tok, err := w.dec.Token()
	if err != nil {
		return errStop
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	// The body object is level 0; each segment is one level below it.
	if len(w.path) > w.limit {
		return bad("field %q: nested more than %d levels deep; at most %d levels of objects and arrays are allowed (DynamoDB's limit for a document)",
			w.path[0].key, w.limit, w.limit)
	}
	switch d {
	case '{':
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = map[string]reflect.Type{}
			structFields(t, fields)
		}
		seen := map[string]bool{}
		for w.dec.More() {
			kt, err := w.dec.Token()
			if err != nil {
				return errStop
			}
			k, _ := kt.(string)
			if seen[k] {
				return bad("duplicate key %q%s: send each key once", k, w.where())
			}
			seen[k] = true
			var sub reflect.Type
			switch {
			case fields != nil:
				ft, ok := fields[k]
				if !ok {
					for name := range fields {
						if strings.EqualFold(name, k) {
							return bad("unknown field %q%s: keys are case-sensitive, did you mean %q?", k, w.where(), name)
						}
					}
				}
				sub = ft
			case t != nil && t.Kind() == reflect.Map:
				sub = t.Elem()
			}
			w.path = append(w.path, segment{key: k, isKey: true})
			err = w.walk(sub)
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			w.path = append(w.path, segment{index: i})
			err := w.walk(elem)
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
	}
	if _, err := w.dec.Token(); err != nil { // the closing delimiter
		return errStop
	}
	return nil
}

// structFields collects the JSON names of t's fields as encoding/json sees
// them: the tag's name, else the Go name; untagged embedded structs are
// flattened.
func structFields(t reflect.Type, into map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			structFields(ft, into)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		into[name] = f.Type
	}
}

// where spells out the current path for an error message: ` in "a.b[2]"`,
// or nothing at the top level.
func (w *walker) where() string {
	if len(w.path) == 0 {
		return ""
	}
	var b strings.Builder
	for i, seg := range w.path {
		switch {
		case seg.isKey && i > 0:
			b.WriteString(".")
			b.WriteString(seg.key)
		case seg.isKey:
			b.WriteString(seg.key)
		default:
			b.WriteString("[")
			b.WriteString(strconv.Itoa(seg.index))
			b.WriteString("]")
		}
	}
	return " in " + strconv.Quote(b.String())
}
