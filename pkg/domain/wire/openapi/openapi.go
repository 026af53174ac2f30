package openapi

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Document is the OpenAPI 3.1 document of the API, as served to people and
// tools (docs/api.md links it).
//
//go:embed openapi.yaml
var Document []byte

// Load parses Document, resolves its references and checks it is a
// well-formed OpenAPI document.
func Load() (*openapi3.T, error) {
	doc, err := parse()
	if err != nil {
		return nil, err
	}
	// kin-openapi checks documents by the 3.0 rules, which know no "null"
	// type; OpenAPI 3.1 (JSON Schema) spells a nullable field with it. The
	// structure is checked on a copy without the "null" types, and the
	// document itself, nulls kept, is what validates values (kin-openapi's
	// value checks do honour "null" in a type list).
	shadow, err := parse()
	if err != nil {
		return nil, err
	}
	dropNullTypes(shadow)
	if err := shadow.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	if doc.OpenAPI != "3.1.0" {
		return nil, fmt.Errorf("openapi.yaml says openapi %q, want 3.1.0", doc.OpenAPI)
	}
	return doc, nil
}

func parse() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(Document)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return doc, nil
}

func dropNullTypes(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if s.Type != nil {
			kept := openapi3.Types{}
			for _, t := range *s.Type {
				if t != openapi3.TypeNull {
					kept = append(kept, t)
				}
			}
			if len(kept) == 0 {
				s.Type = nil
			} else {
				s.Type = &kept
			}
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		walk(s.Not)
		for _, l := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf, s.AllOf} {
			for _, r := range l {
				walk(r)
			}
		}
	}
	for _, s := range doc.Components.Schemas {
		walk(s)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, p := range op.Parameters {
				if p.Value != nil {
					walk(p.Value.Schema)
				}
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				for _, mt := range op.RequestBody.Value.Content {
					walk(mt.Schema)
				}
			}
			for _, r := range op.Responses.Map() {
				if r.Value != nil {
					for _, mt := range r.Value.Content {
						walk(mt.Schema)
					}
				}
			}
		}
	}
}

// Operation is one method and path of the document and the security
// schemes that may authorize it.
type Operation struct {
	Method string
	Path   string
	// Schemes are the names of the security schemes, any one of which
	// authorizes a request, sorted.
	Schemes []string
}

// Validator checks requests and answers against the document.
type Validator struct {
	doc *openapi3.T
	// mux finds a request's path template with net/http's own matching,
	// the one the API's router uses.
	mux *http.ServeMux
}

// NewValidator loads the document and prepares to validate traffic.
func NewValidator() (*Validator, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	v := &Validator{doc: doc, mux: http.NewServeMux()}
	for path := range doc.Paths.Map() {
		v.mux.HandleFunc(path, func(http.ResponseWriter, *http.Request) {})
	}
	return v, nil
}

// Operations lists the document's operations, sorted by path and method.
func (v *Validator) Operations() []Operation {
	var out []Operation
	for path, item := range v.doc.Paths.Map() {
		for method, op := range item.Operations() {
			reqs := v.doc.Security
			if op.Security != nil {
				reqs = *op.Security
			}
			var schemes []string
			for _, req := range reqs {
				for name := range req {
					schemes = append(schemes, name)
				}
			}
			sort.Strings(schemes)
			out = append(out, Operation{Method: method, Path: path, Schemes: schemes})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// Exchange is one request and the answer it got, bodies read.
type Exchange struct {
	Request     *http.Request
	RequestBody []byte
	Status      int
	Header      http.Header
	Body        []byte
}

// Check validates one exchange:
//   - the answer must match the operation's documented answer for its
//     status (an undocumented status fails), including the error body;
//   - a request the document refuses (a missing credential, a body or
//     parameter outside its schema) must be refused by the server with a
//     documented 4xx; the server may refuse a request the document allows
//     (state decides), never accept one it refuses;
//   - a path the document does not describe must get 404, a method it does
//     not describe 405, both with the error body.
func (v *Validator) Check(x Exchange) error {
	ctx := context.Background()
	route, params, found := v.find(x.Request)
	if route == nil {
		want := http.StatusNotFound
		if found {
			want = http.StatusMethodNotAllowed
		}
		if x.Status != want {
			return fmt.Errorf("%s %s is not in the document, and was answered %d, not %d", x.Request.Method, x.Request.URL.Path, x.Status, want)
		}
		return v.checkErrorBody(x)
	}
	req := x.Request.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(x.RequestBody)), nil }
	reqIn := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: presentCredential, MultiError: false},
	}
	reqErr := openapi3filter.ValidateRequest(ctx, reqIn)
	if reqErr != nil && (x.Status < 400 || x.Status >= 500) {
		return fmt.Errorf("%s %s: the document refuses the request (%v), but the server answered %d", x.Request.Method, x.Request.URL.Path, reqErr, x.Status)
	}
	resIn := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqIn, Status: x.Status, Header: x.Header,
		Body:    io.NopCloser(bytes.NewReader(x.Body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, resIn); err != nil {
		return fmt.Errorf("%s %s answered %d %s: %w", x.Request.Method, x.Request.URL.Path, x.Status, x.Body, err)
	}
	return nil
}

// checkErrorBody validates an answer to a request outside the document
// against the error body schema.
func (v *Validator) checkErrorBody(x Exchange) error {
	var body any
	if err := json.Unmarshal(x.Body, &body); err != nil {
		return fmt.Errorf("%s %s answered %d without a JSON body: %q", x.Request.Method, x.Request.URL.Path, x.Status, x.Body)
	}
	s := v.doc.Components.Schemas["ErrorBody"]
	if err := s.Value.VisitJSON(body); err != nil {
		return fmt.Errorf("%s %s answered %d %s: not the error body: %w", x.Request.Method, x.Request.URL.Path, x.Status, x.Body, err)
	}
	return nil
}

// find is the request's operation and path parameters; found says whether
// the path (any method) is in the document.
func (v *Validator) find(r *http.Request) (*routers.Route, map[string]string, bool) {
	probe := &http.Request{Method: http.MethodGet, URL: r.URL, Host: r.Host}
	_, pattern := v.mux.Handler(probe)
	if pattern == "" {
		return nil, nil, false
	}
	item := v.doc.Paths.Value(pattern)
	op := item.GetOperation(r.Method)
	if op == nil {
		return nil, nil, true
	}
	params := map[string]string{}
	var captured *http.Request
	m := http.NewServeMux()
	m.HandleFunc(pattern, func(_ http.ResponseWriter, r *http.Request) { captured = r })
	m.ServeHTTP(httptest.NewRecorder(), probe)
	for _, name := range pathNames(pattern) {
		params[name] = captured.PathValue(name)
	}
	return &routers.Route{Spec: v.doc, Path: pattern, PathItem: item, Method: r.Method, Operation: op}, params, true
}

func pathNames(pattern string) []string {
	var out []string
	for _, seg := range strings.Split(pattern, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			out = append(out, strings.Trim(seg, "{}"))
		}
	}
	return out
}

// presentCredential accepts a security scheme when its credential is in
// the request; whether the credential is right is the server's business.
func presentCredential(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	h := in.RequestValidationInput.Request.Header
	switch {
	case s.Type == "http" && s.Scheme == "bearer":
		if strings.HasPrefix(h.Get("Authorization"), "Bearer ") {
			return nil
		}
	case s.Type == "apiKey" && s.In == "header" && s.Extensions["x-amazon-apigateway-authtype"] == "awsSigv4":
		if strings.HasPrefix(h.Get(s.Name), "AWS4-HMAC-SHA256 ") {
			return nil
		}
	case s.Type == "apiKey" && s.In == "header":
		if h.Get(s.Name) != "" {
			return nil
		}
	case s.Type == "apiKey" && s.In == "cookie":
		if _, err := in.RequestValidationInput.Request.Cookie(s.Name); err == nil {
			return nil
		}
	case s.Type == "apiKey" && s.In == "query":
		if in.RequestValidationInput.Request.URL.Query().Get(s.Name) != "" {
			return nil
		}
	}
	return fmt.Errorf("no %s credential", in.SecuritySchemeName)
}

// Transport is an http.RoundTripper that sends each request through base
// and checks the exchange, calling fail with every mismatch. Paths under
// skip (e.g. a dev server's own routes) are not checked.
func (v *Validator) Transport(base http.RoundTripper, fail func(error), skip ...string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{v: v, base: base, fail: fail, skip: skip}
}

type transport struct {
	v    *Validator
	base http.RoundTripper
	fail func(error)
	skip []string
	mu   sync.Mutex
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	for _, p := range t.skip {
		if strings.HasPrefix(r.URL.Path, p) {
			return t.base.RoundTrip(r)
		}
	}
	var reqBody []byte
	if r.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	res, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	if err := t.v.Check(Exchange{Request: r, RequestBody: reqBody, Status: res.StatusCode, Header: res.Header, Body: body}); err != nil {
		t.mu.Lock()
		t.fail(err)
		t.mu.Unlock()
	}
	return res, nil
}
