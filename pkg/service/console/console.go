package console

import (
	"context"
	"crypto/hmac"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/lib/version"
)

// Ops is the operator work the console's pages read and its buttons do: the
// API implements it with the same code as its admin routes. Errors are
// *wire.Error where the caller did something wrong.
type Ops interface {
	Fleets(ctx context.Context) ([]wire.Fleet, error)
	Workers(ctx context.Context) ([]wire.Worker, error)
	Jobs(ctx context.Context, fleet, status string, limit int) ([]wire.JobSummary, error)
	Job(ctx context.Context, id string) (wire.Job, error)
	Cancel(ctx context.Context, operator, id string) (string, error)
	Retry(ctx context.Context, operator, id string) (string, error)
	Drain(ctx context.Context, operator, id string) (wire.Worker, error)
	// Keys lists the API keys of a tenant ("" for every tenant), oldest
	// first; CreateKey mints one and answers it (shown once) with its
	// listing; RevokeKey revokes one.
	Keys(ctx context.Context, tenant string) ([]wire.APIKey, error)
	CreateKey(ctx context.Context, operator string, req wire.CreateKeyRequest) (string, wire.APIKey, error)
	RevokeKey(ctx context.Context, operator, id string) (wire.APIKey, error)
}

// Keys answers the console's signing keys: the current key signs, the
// previous one verifies during a rotation window. kid is a key id a token
// names, so a source that caches may read again when it does not know it.
type Keys interface {
	SigningKeys(ctx context.Context, kid string) (signing.Ring, error)
}

// Sessions is where logins are used up and sessions ended, shared by every
// API process (*store.Store in AWS and the dev stack).
type Sessions interface {
	// UseConsoleLogin marks a login used; a second use answers
	// fault.ErrLoginUsed.
	UseConsoleLogin(ctx context.Context, nonce string, expires time.Time) error
	EndConsoleSession(ctx context.Context, id string, expires time.Time) error
	ConsoleSessionEnded(ctx context.Context, id string) (bool, error)
	ConsoleEpoch(ctx context.Context, operator string) (int64, error)
	EndConsoleSessions(ctx context.Context, operator string) (int64, error)
}

// Config holds the console's optional settings; the zero Config is the
// defaults.
type Config struct {
	// SessionTTL is how long a browser session lasts (default 1h, at most
	// MaxSessionTTL); LoginTTL how long the URL fleetq console opens may be
	// used (default 2m).
	SessionTTL time.Duration
	LoginTTL   time.Duration
	// EpochTTL is how long a process trusts an operator's session epoch it
	// read (default 10s): "sign out everywhere" ends the operator's sessions
	// in this process at once and in the others within EpochTTL.
	EpochTTL time.Duration
}

// MaxSessionTTL bounds every session, whatever its token says.
const MaxSessionTTL = 12 * time.Hour

// Route is one method and path the console serves.
type Route struct {
	Method  string
	Pattern string
}

// Paths of the console.
const (
	PathRoot      = "/console"
	PathLogin     = "/console/login"
	PathFleets    = "/console/fleets"
	PathWorkers   = "/console/workers"
	PathDrain     = "/console/workers/{worker_id}/drain"
	PathJobs      = "/console/jobs"
	PathJob       = "/console/jobs/{job_id}"
	PathJobCancel = "/console/jobs/{job_id}/cancel"
	PathJobRetry  = "/console/jobs/{job_id}/retry"
	PathKeys      = "/console/keys"
	PathKeyRevoke = "/console/keys/{key_id}/revoke"
	// PathSignOut ends this session; PathSignOutEverywhere every session
	// of its operator.
	PathSignOut           = "/console/sign-out"
	PathSignOutEverywhere = "/console/sign-out-everywhere"
	// CookieName is the session cookie.
	CookieName = "fleetq_console"
)

// Console is the console's HTTP handler.
type Console struct {
	ops Ops
	// signingKeys sign and verify logins and sessions: the console's own
	// key, used for nothing else.
	signingKeys                    Keys
	sessions                       Sessions
	clock                          clock.Clock
	log                            *slog.Logger
	sessionTTL, loginTTL, epochTTL time.Duration
	mux                            *http.ServeMux

	mu     sync.Mutex
	epochs map[string]epochRead // by operator
}

// epochRead is an operator's session epoch as read at a time.
type epochRead struct {
	epoch int64
	at    time.Time
}

type page func(*Console, http.ResponseWriter, *http.Request, session)

var routes = []struct {
	Route
	page page
}{
	{Route{http.MethodGet, PathRoot}, (*Console).root},
	{Route{http.MethodGet, PathFleets}, (*Console).fleets},
	{Route{http.MethodGet, PathWorkers}, (*Console).workers},
	{Route{http.MethodPost, PathDrain}, (*Console).drain},
	{Route{http.MethodGet, PathJobs}, (*Console).jobs},
	{Route{http.MethodGet, PathJob}, (*Console).job},
	{Route{http.MethodPost, PathJobCancel}, (*Console).cancel},
	{Route{http.MethodPost, PathJobRetry}, (*Console).retry},
	{Route{http.MethodGet, PathKeys}, (*Console).keys},
	{Route{http.MethodPost, PathKeys}, (*Console).createKey},
	{Route{http.MethodPost, PathKeyRevoke}, (*Console).revokeKey},
	{Route{http.MethodPost, PathSignOut}, (*Console).signOut},
	{Route{http.MethodPost, PathSignOutEverywhere}, (*Console).signOutEverywhere},
}

// Routes lists every route the console serves (the login included).
func Routes() []Route {
	out := []Route{{http.MethodGet, PathLogin}}
	for _, r := range routes {
		out = append(out, r.Route)
	}
	return out
}

//go:embed templates/*.html
var templateFS embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"pathEscape": url.PathEscape,
	"short":      short,
	// stackVersion is the API's build: the console is served by the API.
	"stackVersion": version.Get,
}).ParseFS(templateFS, "templates/*.html"))

// New returns the console. ops is the operator work behind its pages,
// keys sign and verify logins and sessions (the console's own key, used
// for nothing else), and sessions is where logins are used up and sessions
// ended.
func New(ops Ops, keys Keys, sessions Sessions, clk clock.Clock, log *slog.Logger, cf Config) (*Console, error) {
	switch {
	case ops == nil:
		return nil, errors.New("console.New: no operator ops")
	case keys == nil:
		return nil, errors.New("console.New: no signing keys")
	case sessions == nil:
		return nil, errors.New("console.New: no session store")
	case clk == nil:
		return nil, errors.New("console.New: no clock")
	case log == nil:
		return nil, errors.New("console.New: no logger")
	case cf.SessionTTL < 0 || cf.LoginTTL < 0 || cf.EpochTTL < 0:
		return nil, fmt.Errorf("console.New: negative session %s, login %s or epoch %s lifetime", cf.SessionTTL, cf.LoginTTL, cf.EpochTTL)
	}
	if cf.SessionTTL == 0 {
		cf.SessionTTL = time.Hour
	}
	if cf.LoginTTL == 0 {
		cf.LoginTTL = 2 * time.Minute
	}
	if cf.EpochTTL == 0 {
		cf.EpochTTL = 10 * time.Second
	}
	con := &Console{ops: ops, signingKeys: keys, sessions: sessions, clock: clk, log: log,
		sessionTTL: min(cf.SessionTTL, MaxSessionTTL), loginTTL: cf.LoginTTL, epochTTL: cf.EpochTTL,
		mux: http.NewServeMux(), epochs: map[string]epochRead{}}
	con.mux.HandleFunc(http.MethodGet+" "+PathLogin, con.login)
	for _, r := range routes {
		con.mux.HandleFunc(r.Method+" "+r.Pattern, con.authed(r.Method, r.page))
	}
	return con, nil
}

// ServeHTTP serves the console's pages and forms.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// NewLogin signs a login for operator: the path (with its one-time token)
// a browser opens to start a session, and when it stops being accepted.
func (c *Console) NewLogin(ctx context.Context, operator string) (string, time.Time, error) {
	ring, err := c.signingKeys.SigningKeys(ctx, "")
	if err != nil {
		return "", time.Time{}, fmt.Errorf("console signing key: %w", err)
	}
	epoch, err := c.freshEpoch(ctx, operator)
	if err != nil {
		return "", time.Time{}, err
	}
	now := c.clock.Now()
	exp := now.Add(c.loginTTL)
	tok := sign(ring.Current, claims{Kind: kindLogin, Operator: operator, Issued: now.Unix(), Expires: exp.Unix(), Nonce: nonce(), Epoch: epoch})
	return PathLogin + "?token=" + url.QueryEscape(tok), exp, nil
}

// check verifies a token of kind against the signing keys; a key id the
// ring does not know makes the source read its keys again.
func (c *Console) check(ctx context.Context, token, kind string, maxTTL time.Duration) (session, error) {
	ring, err := c.signingKeys.SigningKeys(ctx, keyIDOf(token))
	if err != nil {
		return session{}, fmt.Errorf("console signing key: %w", err)
	}
	s, err := verify(ring, token, kind, c.clock.Now(), maxTTL)
	if err != nil {
		return session{}, err
	}
	epoch, err := c.epoch(ctx, s.Operator)
	if err != nil {
		return session{}, err
	}
	if s.Epoch < epoch {
		return session{}, errBadToken // signed out everywhere since
	}
	return s, nil
}

// login exchanges a login token, once, for the session cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	lc, err := c.check(ctx, r.URL.Query().Get("token"), kindLogin, c.loginTTL)
	if errors.Is(err, errBadToken) {
		c.unauthenticated(w, "This console link is missing, forged or expired: run fleetq console again for a new one.")
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	err = c.sessions.UseConsoleLogin(ctx, lc.Nonce, time.Unix(lc.Expires, 0))
	if errors.Is(err, fault.ErrLoginUsed) {
		c.log.WarnContext(ctx, "console login used again", "operator", lc.Operator)
		c.unauthenticated(w, "This console link was used already: each works once. Run fleetq console again for a new one.")
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ring, err := c.signingKeys.SigningKeys(ctx, "")
	if err != nil {
		c.fail(w, r, fmt.Errorf("console signing key: %w", err))
		return
	}
	now := c.clock.Now()
	exp := now.Add(c.sessionTTL)
	sc := claims{Kind: kindSession, Operator: lc.Operator, Issued: now.Unix(), Expires: exp.Unix(), Nonce: nonce(), Epoch: lc.Epoch}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: sign(ring.Current, sc), Path: PathRoot, Expires: exp, MaxAge: int(c.sessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r),
	})
	c.log.InfoContext(ctx, "console session", "operator", lc.Operator, "expires", exp.UTC().Format(time.RFC3339))
	http.Redirect(w, r, PathFleets, http.StatusSeeOther)
}

// epoch is an operator's session epoch, read again when older than
// EpochTTL.
func (c *Console) epoch(ctx context.Context, operator string) (int64, error) {
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.epochs[operator]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.epochTTL && !now.Before(e.at) {
		return e.epoch, nil
	}
	return c.freshEpoch(ctx, operator)
}

// freshEpoch reads an operator's session epoch from the store.
func (c *Console) freshEpoch(ctx context.Context, operator string) (int64, error) {
	n, err := c.sessions.ConsoleEpoch(ctx, operator)
	if err != nil {
		return 0, err
	}
	c.remember(operator, n)
	return n, nil
}

func (c *Console) remember(operator string, epoch int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.epochs) > 1000 {
		clear(c.epochs) // operators are few; this only bounds a flood of forged names
	}
	c.epochs[operator] = epochRead{epoch: epoch, at: c.clock.Now()}
}

// secure says the browser reached the API over TLS (directly or through
// API Gateway), so the cookie must never travel in clear.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// authed checks the session cookie (its signature, that it was not signed
// out, alone or everywhere), and on forms the CSRF token, before a page.
func (c *Console) authed(method string, p page) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(CookieName)
		if err != nil {
			c.unauthenticated(w, "Open the console with fleetq console: it signs you in with your operator credential.")
			return
		}
		sc, err := c.check(r.Context(), ck.Value, kindSession, c.sessionTTL)
		if err == nil {
			var ended bool
			if ended, err = c.sessions.ConsoleSessionEnded(r.Context(), sc.Nonce); err == nil && ended {
				err = errBadToken
			}
		}
		if errors.Is(err, errBadToken) {
			clearCookie(w, r)
			c.unauthenticated(w, "Your console session ended, expired or is not valid: run fleetq console again.")
			return
		}
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 4096)
			if err := r.ParseForm(); err != nil {
				c.render(w, http.StatusBadRequest, "error", view{Title: "Bad request", Error: "the form could not be read"})
				return
			}
			if !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(csrfToken(sc))) {
				c.render(w, http.StatusForbidden, "error", view{Title: "Forbidden", Error: "the form's CSRF token is missing or not this session's: reload the page and try again"})
				return
			}
		}
		p(c, w, r, sc)
	}
}

// clearCookie tells the browser to drop the session cookie.
func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: PathRoot, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
}

// signOut ends this session: the store refuses its id from now on, in every
// API process.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request, sc session) {
	if err := c.sessions.EndConsoleSession(r.Context(), sc.Nonce, time.Unix(sc.Expires, 0)); err != nil {
		c.fail(w, r, err)
		return
	}
	clearCookie(w, r)
	c.log.InfoContext(r.Context(), "console sign-out", "operator", sc.Operator)
	c.render(w, http.StatusOK, "signed-out", view{Title: "Signed out"})
}

// signOutEverywhere ends every session of this session's operator.
func (c *Console) signOutEverywhere(w http.ResponseWriter, r *http.Request, sc session) {
	if _, err := c.EndSessions(r.Context(), sc.Operator); err != nil {
		c.fail(w, r, err)
		return
	}
	clearCookie(w, r)
	c.render(w, http.StatusOK, "signed-out", view{Title: "Signed out everywhere",
		Data: "Every console session of " + sc.Operator + " has ended."})
}

// EndSessions ends every console session of operator ("sign out
// everywhere"): at once in this process, within EpochTTL in the others. It
// answers the operator's new session epoch.
func (c *Console) EndSessions(ctx context.Context, operator string) (int64, error) {
	n, err := c.sessions.EndConsoleSessions(ctx, operator)
	if err != nil {
		return 0, err
	}
	c.remember(operator, n)
	c.log.InfoContext(ctx, "console sessions ended", "operator", operator, "epoch", n)
	return n, nil
}

// view is what every template gets.
type view struct {
	Title    string
	Nav      string
	Operator string
	CSRF     string
	Error    string
	Data     any
}

func (c *Console) newView(_ *http.Request, sc session, title, nav string) (view, error) {
	return view{Title: title, Nav: nav, Operator: sc.Operator, CSRF: csrfToken(sc)}, nil
}

func (c *Console) render(w http.ResponseWriter, status int, name string, v view) {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, name, v); err != nil {
		c.log.Error("console template", "template", name, "error", err.Error())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

func (c *Console) unauthenticated(w http.ResponseWriter, msg string) {
	c.render(w, http.StatusUnauthorized, "error", view{Title: "Sign in", Error: msg})
}

// fail renders an error page: the contract's status and message for a
// *wire.Error, a generic 500 otherwise.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	var we *wire.Error
	if !errors.As(err, &we) {
		c.log.ErrorContext(r.Context(), "console request failed", "path", r.URL.Path, "error", err.Error())
		we = &wire.Error{Status: http.StatusInternalServerError, Message: "internal error; reload to try again"}
	}
	c.render(w, we.Status, "error", view{Title: http.StatusText(we.Status), Error: we.Message})
}

func (c *Console) root(w http.ResponseWriter, r *http.Request, _ session) {
	http.Redirect(w, r, PathFleets, http.StatusSeeOther)
}

// fleetView is one fleet on the fleets page.
type fleetView struct {
	wire.Fleet
	Chart chart
	// BootRows are the fleet's boot phases, each with its bar's width as a
	// share of the longest median (none: no worker reported a boot).
	BootRows []bootRow
}

// bootRow is one phase of a fleet's boot timeline on the fleets page.
type bootRow struct {
	wire.BootPhase
	Slowest bool
	// Width is the bar's width in percent of the longest median.
	Width float64
}

// bootRows lays out a fleet's boot timeline: one bar per phase, the
// slowest marked.
func bootRows(b *wire.FleetBoot) []bootRow {
	if b == nil {
		return nil
	}
	longest := 0.0
	for _, p := range b.Phases {
		longest = max(longest, p.P50S)
	}
	out := make([]bootRow, 0, len(b.Phases))
	for _, p := range b.Phases {
		w := 0.0
		if longest > 0 {
			w = float64(int(1000*p.P50S/longest)) / 10
		}
		out = append(out, bootRow{BootPhase: p, Slowest: p.Name == b.Slowest, Width: w})
	}
	return out
}

func (c *Console) fleets(w http.ResponseWriter, r *http.Request, sc session) {
	v, err := c.newView(r, sc, "Fleets", "fleets")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	fs, err := c.ops.Fleets(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	out := make([]fleetView, 0, len(fs))
	for _, f := range fs {
		out = append(out, fleetView{Fleet: f, Chart: newChart(f), BootRows: bootRows(f.Boot)})
	}
	v.Data = out
	c.render(w, http.StatusOK, "fleets", v)
}

func (c *Console) workers(w http.ResponseWriter, r *http.Request, sc session) {
	v, err := c.newView(r, sc, "Workers", "workers")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ws, err := c.ops.Workers(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	out := make([]workerView, 0, len(ws))
	for _, wk := range ws {
		out = append(out, workerView{Worker: wk, GPUs: gpusOf(wk.Capabilities)})
	}
	v.Data = out
	c.render(w, http.StatusOK, "workers", v)
}

// workerView is one worker on the workers page, with the GPUs its agent
// reported.
type workerView struct {
	wire.Worker
	GPUs []gpu
}

// gpu is what the workers page shows of one GPU the agent reported.
type gpu struct {
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
	Driver    string `json:"driver_version"`
}

// gpusOf reads the GPUs out of a worker's capabilities; none when it
// reported none or something else.
func gpusOf(caps json.RawMessage) []gpu {
	var c struct {
		GPUs []gpu `json:"gpus"`
	}
	if len(caps) == 0 || json.Unmarshal(caps, &c) != nil {
		return nil
	}
	return c.GPUs
}

func (c *Console) drain(w http.ResponseWriter, r *http.Request, sc session) {
	if _, err := c.ops.Drain(r.Context(), sc.Operator, r.PathValue("worker_id")); err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, PathWorkers, http.StatusSeeOther)
}

// statuses are the job statuses the jobs page filters by.
var statuses = []string{"accepted", "queued", "leased", "succeeded", "dead", "canceled"}

// jobsView is the jobs page: its filters and the jobs they select.
type jobsView struct {
	Status, Fleet, Tenant string
	Statuses              []string
	Fleets                []string
	Jobs                  []wire.JobSummary
	Back                  string
}

// jobsLimit is how many jobs of each status and fleet the page reads.
const jobsLimit = 200

func (c *Console) jobs(w http.ResponseWriter, r *http.Request, sc session) {
	v, err := c.newView(r, sc, "Jobs", "jobs")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	jv := jobsView{Status: q.Get("status"), Fleet: q.Get("fleet"), Tenant: q.Get("tenant"), Statuses: statuses, Back: r.URL.RequestURI()}
	if jv.Status == "dead" {
		v.Title, v.Nav = "Dead letters", "dead"
	}
	fs, err := c.ops.Fleets(r.Context())
	if err != nil {
		c.fail(w, r, err)
		return
	}
	for _, f := range fs {
		jv.Fleets = append(jv.Fleets, f.FleetSlug)
	}
	want := statuses
	if jv.Status != "" {
		want = []string{jv.Status}
	}
	for _, st := range want {
		js, err := c.ops.Jobs(r.Context(), jv.Fleet, st, jobsLimit)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		for _, j := range js {
			if jv.Tenant == "" || j.TenantID == jv.Tenant {
				jv.Jobs = append(jv.Jobs, j)
			}
		}
	}
	sort.SliceStable(jv.Jobs, func(i, k int) bool { return deref(jv.Jobs[i].UpdatedAt) > deref(jv.Jobs[k].UpdatedAt) })
	v.Data = jv
	c.render(w, http.StatusOK, "jobs", v)
}

func (c *Console) job(w http.ResponseWriter, r *http.Request, sc session) {
	j, err := c.ops.Job(r.Context(), r.PathValue("job_id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v, err := c.newView(r, sc, "Job "+j.JobID, "jobs")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v.Data = j
	c.render(w, http.StatusOK, "job", v)
}

func (c *Console) cancel(w http.ResponseWriter, r *http.Request, sc session) {
	id := r.PathValue("job_id")
	if _, err := c.ops.Cancel(r.Context(), sc.Operator, id); err != nil {
		c.fail(w, r, err)
		return
	}
	c.back(w, r, "/console/jobs/"+url.PathEscape(id))
}

func (c *Console) retry(w http.ResponseWriter, r *http.Request, sc session) {
	id := r.PathValue("job_id")
	if _, err := c.ops.Retry(r.Context(), sc.Operator, id); err != nil {
		c.fail(w, r, err)
		return
	}
	c.back(w, r, "/console/jobs/"+url.PathEscape(id))
}

// back redirects to the form's "back" page when it is a console page, else
// to def.
func (c *Console) back(w http.ResponseWriter, r *http.Request, def string) {
	to := r.PostForm.Get("back")
	if !strings.HasPrefix(to, PathRoot+"/") || strings.ContainsAny(to, "\\\r\n") || strings.HasPrefix(to, "//") {
		to = def
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// short is an API time (RFC 3339, UTC) to the second, for tables.
func short(s *string) string {
	if s == nil {
		return "—"
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return *s
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}
