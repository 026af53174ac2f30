package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Error is a decoding problem, safe to show to the caller.
type Error struct{ Msg string }

// Error implements error.
func (e *Error) Error() string { return e.Msg }

func bad(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Decode decodes data, which must be exactly one JSON object, into v. An empty
// body decodes as {} when allowEmpty is set.
func Decode(data []byte, v any, allowEmpty bool) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		if allowEmpty {
			trimmed = []byte("{}")
		} else {
			return bad("the body is empty; send a JSON object")
		}
	}
	if trimmed[0] != '{' {
		return bad("the body must be a JSON object")
	}
	if !utf8.Valid(trimmed) {
		return bad("the body is not valid UTF-8 (the first bad byte is at offset %d)", invalidUTF8At(trimmed))
	}
	// Keys first: a repeated key is named as such, not as the unknown
	// field or wrong type its second value may also be.
	if err := checkKeys(trimmed, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describe(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return bad("unexpected data after the JSON object")
	}
	return nil
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func describe(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return bad("malformed JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(body)"
		}
		return bad("field %q: must be %s, got %s", field, kind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return bad("malformed JSON: the body ends too early")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return bad("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return bad("malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

func kind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	return "a " + k
}

// RequireObject checks that an optional field holds a JSON object: absent
// and null pass (answering nil), anything else but an object is an error.
func RequireObject(field string, raw json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, nil
	}
	if t[0] != '{' {
		return nil, bad("field %q: must be a JSON object", field)
	}
	return t, nil
}
