package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
)

// TestConsolePrintsALoginThatStartsASession runs fleetq console against the
// dev stack, opens the printed URL as a browser would and checks that it
// sets the session cookie and lands on the fleets page.
func TestConsolePrintsALoginThatStartsASession(t *testing.T) {
	t.Parallel()
	stack := startStack(t)
	var out, errOut bytes.Buffer
	code := runCLI(t.Context(), []string{"console", "--api", stack.URL, "--operator-token", stack.OperatorToken}, &out, &errOut)
	if code != 0 {
		t.Fatalf("fleetq console = %d: %s", code, errOut.String())
	}
	u := strings.TrimSpace(out.String())
	if !strings.HasPrefix(u, stack.URL+"/console/login?token=") {
		t.Fatalf("fleetq console printed %q, want a login URL of %s", u, stack.URL)
	}
	jar, _ := cookiejar.New(nil)
	var setCookie []string
	client := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		setCookie = append(setCookie, req.Response.Header.Values("Set-Cookie")...)
		return nil
	}}
	res, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Request.URL.Path != "/console/fleets" || !strings.Contains(string(body), "<h1>Fleets</h1>") {
		t.Fatalf("the login URL led to %d %s: %.300s", res.StatusCode, res.Request.URL, body)
	}
	if len(setCookie) != 1 {
		t.Fatalf("Set-Cookie on login = %q, want one session cookie", setCookie)
	}
	for _, attr := range []string{"fleetq_console=", "Path=/console", "HttpOnly", "SameSite=Strict", "Max-Age=3600"} {
		if !strings.Contains(setCookie[0], attr) {
			t.Errorf("session cookie %q lacks %s", setCookie[0], attr)
		}
	}
	// The link works once.
	if res, err := http.Get(u); err != nil || res.StatusCode != 401 {
		t.Fatalf("the login URL a second time = %v, %v; want 401", res.StatusCode, err)
	}
	// --sign-out-everywhere ends the browser's session.
	out.Reset()
	if code := runCLI(t.Context(), []string{"console", "--api", stack.URL, "--operator-token", stack.OperatorToken, "--sign-out-everywhere"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "has ended") {
		t.Fatalf("fleetq console --sign-out-everywhere = %d: %s %s", code, out.String(), errOut.String())
	}
	if res, err := client.Get(stack.URL + "/console/fleets"); err != nil || res.StatusCode != 401 {
		t.Fatalf("the session after --sign-out-everywhere = %v, %v; want 401", res.StatusCode, err)
	}

	code = runCLI(t.Context(), []string{"console", "--api", stack.URL, "--operator-token", "wrong"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "unauthenticated") {
		t.Errorf("fleetq console with a wrong token = %d: %s", code, errOut.String())
	}
}
