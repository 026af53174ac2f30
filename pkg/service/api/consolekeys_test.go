package api_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// consoleBrowser is a console session on the harness's stack, through the
// contract-checking client, following no redirect.
type consoleBrowser struct {
	h      *harness
	http   *http.Client
	cookie *http.Cookie
}

func (h *harness) consoleSession() *consoleBrowser {
	h.t.Helper()
	r := h.do("POST", "/api/admin/console-session", "op", map[string]any{})
	h.want(r, 200, "")
	b := &consoleBrowser{h: h, http: &http.Client{Transport: h.http.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	res, _ := b.send("GET", r.body["path"].(string), nil)
	for _, c := range res.Cookies() {
		if c.Name == "fleetq_console" {
			b.cookie = c
		}
	}
	if b.cookie == nil {
		h.t.Fatalf("the console login set no session cookie (%d)", res.StatusCode)
	}
	return b
}

func (b *consoleBrowser) send(method, path string, form url.Values) (*http.Response, string) {
	b.h.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.h.stack.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.cookie != nil {
		req.AddCookie(b.cookie)
	}
	res, err := b.http.Do(req)
	if err != nil {
		b.h.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, string(raw)
}

var (
	csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	newKey    = regexp.MustCompile(`<code id="new-key">(fqk1\.[^<]+)</code>`)
)

// An operator manages tenants' API keys in the console: a key created
// there is shown once and works on the producer routes for its tenant
// only; revoked there, it is refused. The forms need the session and its
// CSRF token.
func TestConsoleManagesAPIKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	b := h.consoleSession()
	res, page := b.send("GET", "/console/keys", nil)
	m := csrfInput.FindStringSubmatch(page)
	if res.StatusCode != 200 || m == nil || !strings.Contains(page, "No API key") {
		t.Fatalf("keys page = %d: %.400s", res.StatusCode, page)
	}
	csrf := m[1]

	// Nobody, and a session without the CSRF token, create nothing.
	anon := &consoleBrowser{h: h, http: b.http}
	if res, _ := anon.send("POST", "/console/keys", url.Values{"csrf": {csrf}, "tenant_id": {"acme"}}); res.StatusCode != 401 {
		t.Errorf("create without a session = %d, want 401", res.StatusCode)
	}
	if res, _ := b.send("POST", "/console/keys", url.Values{"tenant_id": {"acme"}}); res.StatusCode != 403 {
		t.Errorf("create without the CSRF token = %d, want 403", res.StatusCode)
	}
	for name, form := range map[string]url.Values{
		"a bad tenant id": {"csrf": {csrf}, "tenant_id": {"ACME"}},
		"a bad expiry":    {"csrf": {csrf}, "tenant_id": {"acme"}, "expires_in_days": {"soon"}},
	} {
		if res, page := b.send("POST", "/console/keys", form); res.StatusCode != 400 || newKey.MatchString(page) {
			t.Errorf("create with %s = %d", name, res.StatusCode)
		}
	}
	if l := h.do("GET", "/api/admin/keys", "op", nil); len(l.body["keys"].([]any)) != 0 {
		t.Fatalf("refused forms created keys: %s", l.raw)
	}

	res, page = b.send("POST", "/console/keys", url.Values{"csrf": {csrf}, "tenant_id": {"acme"}, "name": {"render ci"}, "expires_in_days": {"30"}})
	k := newKey.FindStringSubmatch(page)
	if res.StatusCode != 201 || k == nil || !strings.Contains(page, "render ci") {
		t.Fatalf("create = %d: %.600s", res.StatusCode, page)
	}
	key := k[1]
	list := h.do("GET", "/api/admin/keys?tenant=acme", "op", nil)
	ks := list.body["keys"].([]any)
	if len(ks) != 1 || ks[0].(map[string]any)["name"] != "render ci" || ks[0].(map[string]any)["expires_at"] == nil {
		t.Fatalf("acme's keys after the form: %s", list.raw)
	}
	id := ks[0].(map[string]any)["key_id"].(string)
	// The key acts for acme; the listing page never shows it again.
	h.want(h.do("POST", "/api/jobs", key, map[string]any{"job_id": "c-1", "workflow_id": "wf-a", "input": map[string]any{}}), 202, "")
	if _, again := b.send("GET", "/console/keys?tenant=acme", nil); strings.Contains(again, key) || !strings.Contains(again, "fqk1."+id) {
		t.Fatalf("the keys page after creation shows the key or not its id: %.600s", again)
	}

	if res, _ := b.send("POST", "/console/keys/"+id+"/revoke", url.Values{}); res.StatusCode != 403 {
		t.Errorf("revoke without the CSRF token = %d, want 403", res.StatusCode)
	}
	if res, _ := b.send("POST", "/console/keys/nosuchkey/revoke", url.Values{"csrf": {csrf}}); res.StatusCode != 404 {
		t.Errorf("revoke of a missing key = %d, want 404", res.StatusCode)
	}
	h.waitFor(func() bool { return h.do("GET", "/api/jobs/c-1", key, nil).status == 200 }, "c-1 to be dispatched")
	res, _ = b.send("POST", "/console/keys/"+id+"/revoke", url.Values{"csrf": {csrf}})
	if res.StatusCode != 303 || res.Header.Get("Location") != "/console/keys?tenant=acme" {
		t.Fatalf("revoke = %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	h.want(h.do("GET", "/api/jobs/c-1", key, nil), 401, "unauthenticated")
	if _, after := b.send("GET", "/console/keys?tenant=acme", nil); !strings.Contains(after, "revoked") || strings.Contains(after, `name="revoke"`) {
		t.Fatalf("the keys page after revoking: %.600s", after)
	}
}
