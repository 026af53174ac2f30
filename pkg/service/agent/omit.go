package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// An API of an earlier release refuses a request field it does not know:
// 400 invalid_argument with a message naming it as its strict decoder
// does, `unknown field "boot"` (docs/api.md, "Requests and errors"). Every
// field a worker route gained since the previous release is optional, so
// the client leaves the named field out, remembers it for the route and
// calls again: an agent of release N works against the API of N−1
// (docs/deploy.md, "Compatibility"). Only fields of the request's own type
// are left out, never a key inside a field of free-form JSON
// (capabilities, a result).

// refusedField answers the field an API refused as unknown, if err is such
// a refusal. A key that matches a field but for its case is named with
// "keys are case-sensitive" and is not such a refusal.
func refusedField(err error) (string, bool) {
	var ae *wire.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != wire.CodeInvalidArgument {
		return "", false
	}
	_, rest, ok := strings.Cut(ae.Message, `unknown field "`)
	if !ok {
		return "", false
	}
	name, rest, ok := strings.Cut(rest, `"`)
	if !ok || name == "" || strings.HasPrefix(rest, ": keys are case-sensitive") {
		return "", false
	}
	return name, true
}

// fieldPaths lists where the request type t has a field whose JSON name is
// name, each as its path of JSON names from the body's top: embedded
// structs are flattened, structs (and pointers to them) entered, and a
// field of raw JSON, a map or a slice never entered.
func fieldPaths(t reflect.Type, name string) [][]string {
	var out [][]string
	var walk func(t reflect.Type, at []string, depth int)
	walk = func(t reflect.Type, at []string, depth int) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || depth > 8 {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "-" {
				continue
			}
			if f.Anonymous && tag == "" {
				walk(f.Type, at, depth+1)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if tag == "" {
				tag = f.Name
			}
			path := append(append([]string(nil), at...), tag)
			if tag == name {
				out = append(out, path)
			}
			walk(f.Type, path, depth+1)
		}
	}
	if t != nil {
		walk(t, nil, 0)
	}
	return out
}

// omit removes from the JSON body of a request of type t every field named
// name; it answers false when the body had none (the API refused something
// the client did not send as a field of t).
func omit(data []byte, t reflect.Type, name string) ([]byte, bool) {
	paths := fieldPaths(t, name)
	if len(paths) == 0 {
		return data, false
	}
	var body map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are sent again as they were written
	if err := dec.Decode(&body); err != nil || body == nil {
		return data, false
	}
	removed := false
	for _, p := range paths {
		obj := body
		for _, k := range p[:len(p)-1] {
			obj, _ = obj[k].(map[string]any)
		}
		last := p[len(p)-1]
		if _, ok := obj[last]; ok {
			delete(obj, last)
			removed = true
		}
	}
	if !removed {
		return data, false
	}
	out, err := json.Marshal(body)
	if err != nil {
		return data, false
	}
	return out, true
}
