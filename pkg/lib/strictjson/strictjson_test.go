package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
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
	for _, seed := range []string{`{}`, `{"name":"x","priority":3,"input":{"a":[1,2]}}`, `{"input":null}`, `[`, `{"priority":1e99}`,
		`{"name":"a","name":"b"}`, `{"NAME":"a"}`, `{"input":{"k":1,"k":2}}`, `{"Input":{}}`, "{\"name\":\"\xff\"}", `{"input":{"a":{"b":[{"c":1,"c":1}]}}}`} {
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
		if !utf8.Valid(data) {
			t.Fatalf("accepted invalid UTF-8 %q", data)
		}
		// What was accepted means one thing to every parser: each key once,
		// and each names a field exactly.
		var generic map[string]json.RawMessage
		if len(bytes.TrimSpace(data)) > 0 {
			if err := json.Unmarshal(data, &generic); err != nil {
				t.Fatalf("accepted %q that a generic decode refuses: %v", data, err)
			}
			if n := topLevelKeys(bytes.TrimSpace(data)); n != len(generic) {
				t.Fatalf("accepted %q with a repeated key", data)
			}
		}
		for k := range generic {
			switch k {
			case "name", "priority", "input", "progress":
			default:
				t.Fatalf("accepted key %q of %q that names no field exactly", k, data)
			}
		}
	})
}

type ref struct {
	JobID string `json:"job_id"`
}

type nested struct {
	ref
	Tags   map[string]string `json:"tags"`
	Items  []ref             `json:"items"`
	Detail *struct {
		Code string `json:"code"`
	} `json:"detail"`
	Input json.RawMessage `json:"input"`
}

func TestDecodeRefusesDuplicateAndCaseFoldedKeys(t *testing.T) {
	cases := []struct {
		body    string
		wantErr string
	}{
		{`{"job_id":"a","tags":{"k":"v"},"items":[{"job_id":"b"}],"detail":{"code":"c"},"input":{"x":{"y":1}}}`, ""},
		// keys that differ only in case are distinct keys in a map or a raw object
		{`{"tags":{"k":"v","K":"w"},"input":{"a":1,"A":2}}`, ""},
		{`{"job_id":"a","job_id":"b"}`, `duplicate key "job_id": send each key once`},
		{`{"tags":{"k":"v","k":"w"}}`, `duplicate key "k" in "tags"`},
		{`{"items":[{"job_id":"a"},{"job_id":"b","job_id":"c"}]}`, `duplicate key "job_id" in "items[1]"`},
		{`{"input":{"x":{"y":1,"y":2}}}`, `duplicate key "y" in "input.x"`},
		{`{"JOB_ID":"a"}`, `unknown field "JOB_ID": keys are case-sensitive, did you mean "job_id"?`},
		{`{"Job_Id":"a"}`, `did you mean "job_id"?`},
		{`{"detail":{"CODE":"c"}}`, `unknown field "CODE" in "detail": keys are case-sensitive, did you mean "code"?`},
		{`{"items":[{"jobID":"a"}]}`, `unknown field "jobID"`},
		{"{\"job_id\":\"a\xff\"}", `not valid UTF-8 (the first bad byte is at offset 12)`},
		{"{\"input\":{\"k\":\"\xc3\"}}", `not valid UTF-8`},
	}
	for _, c := range cases {
		var v nested
		err := Decode([]byte(c.body), &v, false)
		if c.wantErr == "" {
			if err != nil {
				t.Errorf("Decode(%q) = %v", c.body, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("Decode(%q) = %v, want *Error containing %q", c.body, err, c.wantErr)
		}
	}
}

// topLevelKeys counts the keys of a JSON object as written, duplicates included.
func topLevelKeys(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return -1
	}
	n := 0
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return -1
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return -1
		}
		n++
	}
	return n
}
