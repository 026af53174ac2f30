package console_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/service/console"
)

// A login link works once, also when the second use reaches another API
// process: the nonce is used up by a conditional write in the store.
func TestALoginLinkWorksOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "console-key")
	other := newProcess(t, e.st, e.clk, keyRing(t, "console-key"))
	ck := e.sessionFrom(e.login)
	if e.status(ck) != 200 {
		t.Fatal("the first use of the link gave no session")
	}
	for name, p := range map[string]*env{"this process": e, "another process": other} {
		res, body := p.get(e.login, nil)
		if res.StatusCode != 401 || !strings.Contains(body, "used already") {
			t.Errorf("the link again in %s = %d %.200s, want 401 saying it was used", name, res.StatusCode, body)
		}
		for _, c := range res.Cookies() {
			if c.Name == console.CookieName && c.Value != "" {
				t.Errorf("the link again in %s set a session cookie", name)
			}
		}
	}
	// A new link is a new login.
	if other.status(other.sessionFrom(other.newLogin())) != 200 {
		t.Fatal("a second link gave no session")
	}
}

// Signing out ends the session in every process: the cookie is cleared and
// the session id refused afterwards, even if the browser sends it again.
func TestASignedOutSessionIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "console-key")
	other := newProcess(t, e.st, e.clk, keyRing(t, "console-key"))
	ck, keep := e.session(), e.session()
	csrf := e.csrf(ck)
	if res, _ := e.post(console.PathSignOut, ck, url.Values{}); res.StatusCode != 403 {
		t.Fatalf("sign-out without the CSRF token = %d, want 403", res.StatusCode)
	}
	if e.status(ck) != 200 {
		t.Fatal("a refused sign-out ended the session")
	}
	res, body := e.post(console.PathSignOut, ck, url.Values{"csrf": {csrf}})
	if res.StatusCode != 200 || !strings.Contains(body, "has ended") {
		t.Fatalf("sign-out = %d %.200s", res.StatusCode, body)
	}
	cleared := false
	for _, c := range res.Cookies() {
		cleared = cleared || (c.Name == console.CookieName && c.Value == "" && c.MaxAge < 0)
	}
	if !cleared {
		t.Errorf("sign-out did not clear the cookie: %v", res.Header.Values("Set-Cookie"))
	}
	for name, p := range map[string]*env{"this process": e, "another process": other} {
		if s := p.status(ck); s != 401 {
			t.Errorf("the signed-out session in %s = %d, want 401", name, s)
		}
	}
	if res, _ := e.post("/console/jobs/j-1/cancel", ck, url.Values{"csrf": {csrf}}); res.StatusCode != 401 || len(e.ops.actions) != 0 {
		t.Errorf("a form of the signed-out session = %d, acted %v", res.StatusCode, e.ops.actions)
	}
	if e.status(keep) != 200 {
		t.Error("signing out one session ended another")
	}
}

// "Sign out everywhere" ends every session of the operator signed before
// it, and the logins not yet used: in this process at once, in another
// within its EpochTTL. A session signed after it works.
func TestSignOutEverywhereEndsOlderSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "console-key")
	other := newProcess(t, e.st, e.clk, keyRing(t, "console-key"))
	a, b := e.session(), other.session()
	pending := e.newLogin()
	if other.status(a) != 200 || other.status(b) != 200 {
		t.Fatal("sessions do not work before the sign-out")
	}
	res, body := e.post(console.PathSignOutEverywhere, b, url.Values{"csrf": {e.csrf(b)}})
	if res.StatusCode != 200 || !strings.Contains(body, "Every console session of "+operator+" has ended") {
		t.Fatalf("sign out everywhere = %d %.300s", res.StatusCode, body)
	}
	if e.status(a) != 401 || e.status(b) != 401 {
		t.Error("this process still takes the older sessions")
	}
	if res, _ := e.get(pending, nil); res.StatusCode != 401 {
		t.Errorf("a login signed before = %d, want 401", res.StatusCode)
	}
	e.clk.Advance(10 * time.Second) // the other process's EpochTTL
	if other.status(a) != 401 || other.status(b) != 401 {
		t.Error("another process takes the older sessions after its EpochTTL")
	}
	fresh := other.session()
	if e.status(fresh) != 200 || other.status(fresh) != 200 {
		t.Error("a session signed after the sign-out is refused")
	}
	// The API's route (the operator credential) does the same.
	if _, err := e.c.EndSessions(t.Context(), operator); err != nil {
		t.Fatal(err)
	}
	if e.status(fresh) != 401 {
		t.Error("EndSessions left a session")
	}
}

// A rotation of the console key signs nobody out: sessions signed with the
// previous key verify until the rotation window ends, new ones use the
// current key, and a key no longer in the ring verifies nothing.
func TestSessionsOfThePreviousKeyLastTheRotationWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "key-one")
	old := e.session()
	one, _ := signing.NewKey("key-one")
	two, _ := signing.NewKey("key-two")
	rotated := newProcess(t, e.st, e.clk, signing.Static{Current: two, Previous: one, PreviousUntil: e.clk.Now().Add(30 * time.Minute)})
	if s := rotated.status(old); s != 200 {
		t.Fatalf("a session of the previous key within the window = %d", s)
	}
	fresh := rotated.session()
	if !strings.HasPrefix(fresh.Value, two.ID+".") || !strings.HasPrefix(old.Value, one.ID+".") {
		t.Fatalf("sessions do not name their key: %q, %q", fresh.Value[:20], old.Value[:20])
	}
	if s := e.status(fresh); s != 401 {
		t.Errorf("a process without the new key took its session: %d", s)
	}
	e.clk.Advance(30 * time.Minute)
	if s := rotated.status(old); s != 401 {
		t.Errorf("a session of the previous key after the window = %d, want 401", s)
	}
	if s := rotated.status(fresh); s != 200 {
		t.Errorf("a session of the current key = %d", s)
	}
}
