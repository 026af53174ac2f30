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

// checkKeys walks every object in data and refuses a key that appears twice
// in one object (parsers disagree on which one wins) and a key that matches
// a field of the target only when case is ignored (encoding/json would take
// it, another parser would not). t is the type the value decodes into; nil
// (a json.RawMessage, an interface) still gets the duplicate check.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := walk(dec, t, "")
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

func walk(dec *json.Decoder, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage || (t != nil && t.Kind() == reflect.Interface) {
		t = nil
	}
	tok, err := dec.Token()
	if err != nil {
		return errStop
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = map[string]reflect.Type{}
			structFields(t, fields)
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errStop
			}
			k, _ := kt.(string)
			if seen[k] {
				return bad("duplicate key %q%s: send each key once", k, where(path))
			}
			seen[k] = true
			var sub reflect.Type
			switch {
			case fields != nil:
				ft, ok := fields[k]
				if !ok {
					for name := range fields {
						if strings.EqualFold(name, k) {
							return bad("unknown field %q%s: keys are case-sensitive, did you mean %q?", k, where(path), name)
						}
					}
				}
				sub = ft
			case t != nil && t.Kind() == reflect.Map:
				sub = t.Elem()
			}
			if err := walk(dec, sub, join(path, k)); err != nil {
				return err
			}
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
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

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return ""
	}
	return " in " + strconv.Quote(path)
}
