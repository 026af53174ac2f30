package api_test

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/service/api"
)

// TestDocsListEveryRoute keeps docs/api.md's route table and the router in
// step: every route the router serves is a row with its credential, and
// every row is a route the router serves.
func TestDocsListEveryRoute(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	documented := map[string]string{} // "METHOD path" -> auth
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 5 || strings.TrimSpace(cells[0]) != "" {
			continue
		}
		method := strings.TrimSpace(cells[1])
		if method != "GET" && method != "POST" && method != "PUT" && method != "DELETE" && method != "PATCH" {
			continue
		}
		key := method + " " + strings.Trim(strings.TrimSpace(cells[2]), "`")
		if _, dup := documented[key]; dup {
			t.Errorf("docs/api.md lists %s twice", key)
		}
		documented[key] = strings.TrimSpace(cells[3])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, r := range api.Routes() {
		key := r.Method + " " + r.Pattern
		served[key] = true
		auth, ok := documented[key]
		switch {
		case !ok:
			t.Errorf("the router serves %s, which docs/api.md's route table does not list", key)
		case auth != string(r.Auth):
			t.Errorf("docs/api.md says %s takes %q; the router requires %q", key, auth, r.Auth)
		}
	}
	for key := range documented {
		if !served[key] {
			t.Errorf("docs/api.md lists %s, which the router does not serve", key)
		}
	}
	if len(served) == 0 {
		t.Fatal("api.Routes() is empty")
	}
}

// TestRoutesAreServed checks that Routes describes the handler: every
// listed route answers something other than the unknown-route 404 without
// credentials, and its credential is asked for.
func TestRoutesAreServed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, r := range api.Routes() {
		path := strings.NewReplacer("{job_id}", "j1", "{worker_id}", "w1", "{action}", "drain").Replace(r.Pattern)
		if r.Auth == api.AuthConsole || r.Auth == api.AuthConsoleLogin {
			if status := h.page(r.Method, path); status != 401 {
				t.Errorf("%s %s without a session = %d, want 401", r.Method, path, status)
			}
			continue
		}
		rep := h.do(r.Method, path, "", "{}")
		if rep.status != 401 {
			t.Errorf("%s %s without a credential = %d %s, want 401", r.Method, path, rep.status, rep.raw)
		}
	}
}
