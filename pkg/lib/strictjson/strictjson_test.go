package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
)

type sample struct {
	Name     string          `json:"name"`
	Priority int             `json:"priority"`
	Input    json.RawMessage `json:"input"`
	Progress float64         `json:"progress"`
}

func TestDecode(t *testing.T) {
	cases := []struct {
		body       string
		allowEmpty bool
		wantErr    string
	}{
		{`{"name":"a","priority":2,"input":{"x":1}}`, false, ""},
		{``, true, ""},
		{``, false, "the body is empty"},
		{`[1,2]`, false, "must be a JSON object"},
		{`{"name":"a"} {"x":1}`, false, "unexpected data after the JSON object"},
		{`{"name":"a","colour":"red"}`, false, `unknown field "colour"`},
		{`{"priority":"high"}`, false, `field "priority": must be a whole number, got string`},
		{`{"priority":1.5}`, false, `field "priority": must be a whole number`},
		{`{"name":`, false, "malformed JSON"},
		{`{"progress":true}`, false, `field "progress": must be a number, got bool`},
	}
	for _, c := range cases {
		var s sample
		err := Decode([]byte(c.body), &s, c.allowEmpty)
		if c.wantErr == "" {
			if err != nil {
				t.Errorf("Decode(%q) = %v", c.body, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("Decode(%q) = %v, want error containing %q", c.body, err, c.wantErr)
		}
	}
}

func TestRequireObject(t *testing.T) {
	var s sample
	if err := Decode([]byte(`{"input": {"b":2, "a":[1,{"c":null}]}}`), &s, false); err != nil {
		t.Fatal(err)
	}
	obj, err := RequireObject("input", s.Input)
	if err != nil || string(obj) != `{"b":2, "a":[1,{"c":null}]}` {
		t.Fatalf("RequireObject = %s, %v", obj, err)
	}
	for _, bad := range []string{`[1]`, `"x"`, `3`, `true`} {
		if _, err := RequireObject("input", json.RawMessage(bad)); err == nil || !strings.Contains(err.Error(), `field "input": must be a JSON object`) {
			t.Errorf("RequireObject(%s) = %v", bad, err)
		}
	}
	for _, ok := range []string{``, `null`, ` null `} {
		if obj, err := RequireObject("input", json.RawMessage(ok)); err != nil || obj != nil {
			t.Errorf("RequireObject(%q) = %s, %v", ok, obj, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, seed := range []string{`{}`, `{"name":"x","priority":3,"input":{"a":[1,2]}}`, `{"input":null}`, `[`, `{"priority":1e99}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s sample
		err := Decode(data, &s, true)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not a *strictjson.Error: %v", err, err)
			}
			return
		}
		if obj, err := RequireObject("input", s.Input); err == nil && obj != nil && obj[0] != '{' {
			t.Fatalf("RequireObject accepted %q", obj)
		}
	})
}
