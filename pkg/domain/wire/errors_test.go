package wire_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

func TestWriteErrorThenReadErrorRoundTrips(t *testing.T) {
	sent := &wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeRateLimited, Message: "too many registrations", RetryAfter: 1500 * time.Millisecond}
	rec := httptest.NewRecorder()
	wire.WriteError(rec, sent)
	res := rec.Result()

	if got := res.Header.Get("Content-Type"); got != "application/json" {
		t.Fatalf("Content-Type = %q", got)
	}
	if got := res.Header.Get("Retry-After"); got != "2" {
		t.Fatalf("Retry-After = %q, want the seconds rounded up", got)
	}
	var body map[string]map[string]string
	if err := json.NewDecoder(strings.NewReader(rec.Body.String())).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if len(body) != 1 || len(body["error"]) != 2 || body["error"]["code"] != "rate_limited" || body["error"]["message"] != "too many registrations" {
		t.Fatalf("body = %s", rec.Body.String())
	}

	var err error = fmt.Errorf("register: %w", wire.ReadError(res))
	var got *wire.Error
	if !errors.As(err, &got) {
		t.Fatalf("errors.As found no *wire.Error in %v", err)
	}
	want := wire.Error{Status: 429, Code: wire.CodeRateLimited, Message: "too many registrations", RetryAfter: 2 * time.Second}
	if *got != want {
		t.Fatalf("read %+v, want %+v", *got, want)
	}
	if got.Error() != "429 rate_limited: too many registrations" {
		t.Fatalf("Error() = %q", got.Error())
	}
}

func TestWriteErrorWithoutRetryAfterSetsNoHeader(t *testing.T) {
	rec := httptest.NewRecorder()
	wire.WriteError(rec, &wire.Error{Status: http.StatusConflict, Code: wire.CodeLeaseLost, Message: "gone"})
	if rec.Code != http.StatusConflict || rec.Header().Get("Retry-After") != "" {
		t.Fatalf("status %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	got := wire.ReadError(rec.Result())
	if got.Status != 409 || got.Code != wire.CodeLeaseLost || got.Message != "gone" || got.RetryAfter != 0 {
		t.Fatalf("read %+v", *got)
	}
}

func TestReadErrorOfAnAnswerWithoutTheErrorBody(t *testing.T) {
	for _, body := range []string{"<html>bad gateway</html>", `{"error":{"message":"no code"}}`, ""} {
		rec := httptest.NewRecorder()
		rec.WriteHeader(http.StatusBadGateway)
		rec.Body.WriteString(body)
		got := wire.ReadError(rec.Result())
		if got.Status != 502 || got.Code != wire.CodeUnknown || got.Message != "Bad Gateway" {
			t.Fatalf("body %q: read %+v", body, *got)
		}
	}
}

// TestCodesAreDistinctAndListed reads the package's source, so a code
// constant added without being listed in Codes, or with another code's
// string, fails here.
func TestCodesAreDistinctAndListed(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]string{} // value -> constant name
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for i, name := range vs.Names {
				v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				if prev, dup := declared[v]; dup {
					t.Errorf("%s and %s are both %q", prev, name.Name, v)
				}
				declared[v] = name.Name
			}
		}
	}
	if len(declared) < 11 {
		t.Fatalf("found only %d code constants: %v", len(declared), declared)
	}
	listed := map[wire.Code]bool{}
	for _, c := range wire.Codes {
		if listed[c] {
			t.Errorf("Codes lists %q twice", c)
		}
		listed[c] = true
		if _, ok := declared[string(c)]; !ok {
			t.Errorf("Codes lists %q, which no constant declares", c)
		}
	}
	for v, name := range declared {
		if !listed[wire.Code(v)] {
			t.Errorf("%s (%q) is missing from Codes", name, v)
		}
	}
}
