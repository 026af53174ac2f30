package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/console"
	"github.com/fleetq/fleetq/pkg/service/system"
)

// recordingOps answers the pages with fixed rows and records the actions;
// it stands for the API's operator code, which the browser test exercises.
type recordingOps struct {
	actions []string
	fail    error
	// fleets and workers are the rows the pages show (one empty fleet,
	// no worker, when unset).
	fleets  []wire.Fleet
	workers []wire.Worker
}

func (o *recordingOps) Fleets(context.Context) ([]wire.Fleet, error) {
	if o.fleets != nil {
		return o.fleets, nil
	}
	return []wire.Fleet{{FleetSlug: "render"}}, nil
}
func (o *recordingOps) Workers(context.Context) ([]wire.Worker, error) { return o.workers, nil }
func (o *recordingOps) Jobs(_ context.Context, fleet, status string, _ int) ([]wire.JobSummary, error) {
	if status == "bogus" {
		return nil, &wire.Error{Status: 400, Code: wire.CodeInvalidArgument, Message: `query "status": must be queued, leased, succeeded, dead or canceled`}
	}
	return nil, nil
}
func (o *recordingOps) Job(_ context.Context, id string) (wire.Job, error) {
	return wire.Job{JobID: id, Status: "queued"}, nil
}
func (o *recordingOps) Cancel(_ context.Context, op, id string) (string, error) {
	o.actions = append(o.actions, "cancel "+id+" by "+op)
	return "canceled", o.fail
}
func (o *recordingOps) Retry(_ context.Context, op, id string) (string, error) {
	o.actions = append(o.actions, "retry "+id+" by "+op)
	return "queued", o.fail
}
func (o *recordingOps) Drain(_ context.Context, op, id string) (wire.Worker, error) {
	o.actions = append(o.actions, "drain "+id+" by "+op)
	return wire.Worker{}, o.fail
}

func (o *recordingOps) Keys(context.Context, string) ([]wire.APIKey, error) { return nil, nil }
func (o *recordingOps) CreateKey(_ context.Context, op string, req wire.CreateKeyRequest) (string, wire.APIKey, error) {
	o.actions = append(o.actions, "create key for "+req.TenantID+" by "+op)
	return "fqk1.k1.secret", wire.APIKey{KeyID: "k1", TenantID: req.TenantID}, o.fail
}
func (o *recordingOps) RevokeKey(_ context.Context, op, id string) (wire.APIKey, error) {
	o.actions = append(o.actions, "revoke key "+id+" by "+op)
	return wire.APIKey{KeyID: id, TenantID: "acme"}, o.fail
}

type env struct {
	t     *testing.T
	ops   *recordingOps
	clk   *clock.Fake
	st    console.Sessions
	c     *console.Console
	srv   *httptest.Server
	http  *http.Client
	login string
}

const operator = "arn:aws:iam::1:user/ops"

// newEnv is one API process's console, signing with key, on a fresh table.
func newEnv(t *testing.T, key string) *env {
	t.Helper()
	client, table := testenv.DynamoDB(t)
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	sys, err := system.New(fleetconfig.Default(), client, table, clk, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return newProcess(t, sys.Store, clk, keyRing(t, key))
}

func keyRing(t *testing.T, key string) signing.Static {
	t.Helper()
	ring, err := signing.NewStatic(key)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// newProcess is another API process's console on the same store and clock.
func newProcess(t *testing.T, st console.Sessions, clk *clock.Fake, keys console.Keys) *env {
	t.Helper()
	e := &env{t: t, ops: &recordingOps{}, clk: clk, st: st}
	c, err := console.New(e.ops, keys, st, e.clk, slog.New(slog.DiscardHandler), console.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	e.srv = httptest.NewServer(e.c)
	t.Cleanup(e.srv.Close)
	e.http = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	e.login = e.newLogin()
	return e
}

func (e *env) newLogin() string {
	e.t.Helper()
	path, _, err := e.c.NewLogin(context.Background(), operator)
	if err != nil {
		e.t.Fatal(err)
	}
	return path
}

func (e *env) get(path string, cookie *http.Cookie) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return e.do(req)
}

func (e *env) post(path string, cookie *http.Cookie, form url.Values) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	return e.do(req)
}

func (e *env) do(req *http.Request) (*http.Response, string) {
	res, err := e.http.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// session logs in with a new login and returns the session cookie.
func (e *env) session() *http.Cookie {
	e.t.Helper()
	return e.sessionFrom(e.newLogin())
}

// sessionFrom exchanges a login for the session cookie.
func (e *env) sessionFrom(login string) *http.Cookie {
	e.t.Helper()
	res, _ := e.get(login, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != console.PathFleets {
		e.t.Fatalf("login = %d to %q, want 303 to the fleets page", res.StatusCode, res.Header.Get("Location"))
	}
	for _, c := range res.Cookies() {
		if c.Name == console.CookieName {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/console" {
				e.t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/console", c)
			}
			return c
		}
	}
	e.t.Fatal("login set no session cookie")
	return nil
}

// status is the status of the fleets page with a cookie.
func (e *env) status(ck *http.Cookie) int {
	e.t.Helper()
	res, _ := e.get(console.PathFleets, ck)
	return res.StatusCode
}

// csrf is the CSRF token of a session's pages.
func (e *env) csrf(ck *http.Cookie) string {
	e.t.Helper()
	_, body := e.get(console.PathFleets, ck)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		e.t.Fatalf("the fleets page has no CSRF field: %.300s", body)
	}
	return m[1]
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "console-key")
	if res, body := e.get(console.PathFleets, nil); res.StatusCode != 401 || !strings.Contains(body, "fleetq console") {
		t.Errorf("fleets without a session = %d %q, want 401 saying how to sign in", res.StatusCode, body)
	}
	ck := e.sessionFrom(e.login)
	res, body := e.get(console.PathFleets, ck)
	if res.StatusCode != 200 || !strings.Contains(body, "arn:aws:iam::1:user/ops") {
		t.Fatalf("fleets with the session = %d, want 200 naming the operator: %.200s", res.StatusCode, body)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("Content-Security-Policy %q must allow no script", csp)
	}
	// The session cookie is not a login, and a login is not a session.
	if res, _ := e.get(console.PathLogin+"?token="+url.QueryEscape(ck.Value), nil); res.StatusCode != 401 {
		t.Errorf("a session cookie used as a login = %d, want 401", res.StatusCode)
	}
	tok, _ := url.ParseQuery(strings.TrimPrefix(e.login, console.PathLogin+"?"))
	if res, _ := e.get(console.PathFleets, &http.Cookie{Name: console.CookieName, Value: tok.Get("token")}); res.StatusCode != 401 {
		t.Errorf("a login token used as the session = %d, want 401", res.StatusCode)
	}
	// A forged signature, and another stage's key, are refused.
	forged := *ck
	i := len(ck.Value) - 10 // inside the signature
	flip := byte('A')
	if ck.Value[i] == 'A' {
		flip = 'B'
	}
	forged.Value = ck.Value[:i] + string(flip) + ck.Value[i+1:]
	if res, _ := e.get(console.PathFleets, &forged); res.StatusCode != 401 {
		t.Errorf("a forged session = %d, want 401", res.StatusCode)
	}
	other := newProcess(t, e.st, e.clk, keyRing(t, "another-key"))
	if res, _ := other.get(console.PathFleets, ck); res.StatusCode != 401 {
		t.Errorf("a session of another key = %d, want 401", res.StatusCode)
	}
	// The session ends after an hour; the login link after two minutes.
	unused := e.newLogin()
	e.clk.Advance(time.Hour)
	if res, _ := e.get(console.PathFleets, ck); res.StatusCode != 401 {
		t.Errorf("a session an hour old = %d, want 401", res.StatusCode)
	}
	if res, _ := e.get(unused, nil); res.StatusCode != 401 {
		t.Errorf("a login an hour old = %d, want 401", res.StatusCode)
	}
}

func TestFormsNeedTheSessionsCSRFToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "console-key")
	ck := e.session()
	_, body := e.get("/console/jobs/j-1", ck)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the job page has no CSRF field: %.300s", body)
	}
	for name, form := range map[string]url.Values{"no token": {}, "a wrong token": {"csrf": {"x" + m[1]}}} {
		if res, _ := e.post("/console/jobs/j-1/cancel", ck, form); res.StatusCode != 403 {
			t.Errorf("cancel with %s = %d, want 403", name, res.StatusCode)
		}
	}
	// Another session's token is not this session's.
	ck2 := e.session()
	if res, _ := e.post("/console/jobs/j-1/cancel", ck2, url.Values{"csrf": {m[1]}}); res.StatusCode != 403 {
		t.Errorf("cancel with another session's token = %d, want 403", res.StatusCode)
	}
	if len(e.ops.actions) != 0 {
		t.Fatalf("refused forms acted: %v", e.ops.actions)
	}
	res, _ := e.post("/console/jobs/j-1/cancel", ck, url.Values{"csrf": {m[1]}, "back": {"/console/jobs?status=queued"}})
	if res.StatusCode != 303 || res.Header.Get("Location") != "/console/jobs?status=queued" {
		t.Errorf("cancel = %d to %q, want 303 back to the list", res.StatusCode, res.Header.Get("Location"))
	}
	// back never leaves the console.
	for _, back := range []string{"https://evil.example/", "//evil.example/console/", "/api/jobs"} {
		res, _ = e.post("/console/jobs/j-1/retry", ck, url.Values{"csrf": {m[1]}, "back": {back}})
		if loc := res.Header.Get("Location"); loc != "/console/jobs/j-1" {
			t.Errorf("retry with back=%q redirected to %q, want the job's page", back, loc)
		}
	}
	res, _ = e.post("/console/workers/w-1/drain", ck, url.Values{"csrf": {m[1]}})
	if res.StatusCode != 303 || res.Header.Get("Location") != console.PathWorkers {
		t.Errorf("drain = %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	want := []string{"cancel j-1 by arn:aws:iam::1:user/ops", "retry j-1 by arn:aws:iam::1:user/ops",
		"retry j-1 by arn:aws:iam::1:user/ops", "retry j-1 by arn:aws:iam::1:user/ops", "drain w-1 by arn:aws:iam::1:user/ops"}
	if strings.Join(e.ops.actions, "\n") != strings.Join(want, "\n") {
		t.Errorf("actions = %q, want %q", e.ops.actions, want)
	}
}

func TestErrorsArePagesWithTheContractsStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "console-key")
	ck := e.session()
	res, body := e.get("/console/jobs?status=bogus", ck)
	if res.StatusCode != 400 || !strings.Contains(body, "must be queued, leased") || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("a bad status filter = %d %s: %.200s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	_, page := e.get("/console/jobs/j-1", ck)
	csrf := csrfField.FindStringSubmatch(page)[1]
	e.ops.fail = &wire.Error{Status: 409, Code: wire.CodeConflict, Message: "job j-1 is succeeded; only queued or leased jobs can be canceled"}
	res, body = e.post("/console/jobs/j-1/cancel", ck, url.Values{"csrf": {csrf}})
	if res.StatusCode != 409 || !strings.Contains(body, "only queued or leased jobs") {
		t.Errorf("a refused cancel = %d: %.300s", res.StatusCode, body)
	}
}

// The fleets page shows each fleet's boot timeline: a row and a bar per
// phase, the slowest marked and named; a fleet without one says so.
func TestFleetsPageShowsTheBootTimeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "console-key")
	e.ops.fleets = []wire.Fleet{
		{FleetSlug: "video", Boot: &wire.FleetBoot{Workers: 3, Slowest: "launch_to_agent", Phases: []wire.BootPhase{
			{Name: "launch_to_agent", Workers: 2, P50S: 180, P95S: 240, MaxS: 240},
			{Name: "pool_start_to_agent", Workers: 1, P50S: 24.5, P95S: 24.5, MaxS: 24.5},
			{Name: "runner_ready_to_warmed_up", Workers: 3, P50S: 90, P95S: 95, MaxS: 95},
		}}},
		{FleetSlug: "render"},
	}
	res, body := e.get(console.PathFleets, e.session())
	if res.StatusCode != 200 {
		t.Fatalf("fleets page %d", res.StatusCode)
	}
	for _, want := range []string{
		`id="boot-video"`,
		`the slowest phase is <strong class="slowest-name">launch_to_agent</strong>`,
		`<tr data-phase="launch_to_agent" class="slowest">`,
		`<td>pool_start_to_agent</td><td class="n">1</td><td class="n">24.5 s</td><td class="n">24.5 s</td><td class="n">24.5 s</td>`,
		`<tr data-phase="runner_ready_to_warmed_up">`,
		`<span style="width:50%">`,
		`<span style="width:100%">`,
		`id="boot-render"`,
		`No worker of this fleet has reported its boot yet.`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the fleets page lacks %s", want)
		}
	}
}

func TestNewRequiresEveryDependency(t *testing.T) {
	ops, keys, st, log := &recordingOps{}, keyRing(t, "console-key"), struct{ console.Sessions }{}, slog.New(slog.DiscardHandler)
	for name, f := range map[string]func() (*console.Console, error){
		"ops": func() (*console.Console, error) {
			return console.New(nil, keys, st, clock.Real{}, log, console.Config{})
		},
		"keys": func() (*console.Console, error) {
			return console.New(ops, nil, st, clock.Real{}, log, console.Config{})
		},
		"session": func() (*console.Console, error) {
			return console.New(ops, keys, nil, clock.Real{}, log, console.Config{})
		},
		"clock": func() (*console.Console, error) {
			return console.New(ops, keys, st, nil, log, console.Config{})
		},
		"logger": func() (*console.Console, error) {
			return console.New(ops, keys, st, clock.Real{}, nil, console.Config{})
		},
		"lifetime": func() (*console.Console, error) {
			return console.New(ops, keys, st, clock.Real{}, log, console.Config{LoginTTL: -time.Second})
		},
	} {
		if c, err := f(); err == nil || c != nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New without a good %s: %v, %v", name, c, err)
		}
	}
	if c, err := console.New(ops, keys, st, clock.Real{}, log, console.Config{}); err != nil || c == nil {
		t.Fatalf("New with every dependency: %v, %v", c, err)
	}
}
