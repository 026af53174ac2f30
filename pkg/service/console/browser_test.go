package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// EnvTestOut names the folder the browser tests write their screenshots to
// (default: testdata/out in this package, ignored by git).
const EnvTestOut = "FLEETQ_TEST_OUT"

// browserNames are the Chromium executables the tests look for on PATH.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// The one headless Chromium of this test binary, started by the first
// browser test and stopped by TestMain.
var (
	browserOnce   sync.Once
	browserCtx    context.Context
	browserStop   context.CancelFunc
	browserReason string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if browserStop != nil {
		browserStop()
	}
	os.Exit(code)
}

// browser returns the shared browser, or skips the test saying why there is
// none (under CI, where make test installs Chromium, a missing browser fails).
func browser(t *testing.T) context.Context {
	t.Helper()
	browserOnce.Do(func() {
		var path string
		for _, n := range browserNames {
			if p, err := exec.LookPath(n); err == nil {
				path = p
				break
			}
		}
		if path == "" {
			browserReason = "no Chromium on PATH (" + strings.Join(browserNames, ", ") + "): make browser-deps installs Debian's chromium as root"
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
			chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		if err := chromedp.Do(ctx); err != nil {
			cancel()
			cancelAlloc()
			browserReason = fmt.Sprintf("%s does not start: %v", path, err)
			return
		}
		browserCtx = ctx
		browserStop = func() { cancel(); cancelAlloc() }
	})
	if browserCtx == nil {
		testenv.Unavailable(t, browserReason)
	}
	return browserCtx
}

// outDir is where screenshots go.
func outDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(EnvTestOut)
	if dir == "" {
		dir = filepath.Join("testdata", "out")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

const stackConfig = `
stage: console
fleets:
  - slug: render
    workflows: [render-frame]
    instance_types: [g5.xlarge]
    accept_secret: true
    max_instances: 4
    retry:
      max_attempts: 3
      backoff: [1m]
  - slug: sim
    workflows: [sim-run]
    instance_types: [g6.xlarge]
    max_instances: 2
`

// consoleStack is the dev stack the browser test drives, with its HTTP client.
type consoleStack struct {
	t     *testing.T
	stack *devstack.Stack
}

func (s *consoleStack) call(method, path, auth string, body, out any) int {
	s.t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, s.stack.URL+path, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	switch {
	case auth == "op":
		req.Header.Set("Authorization", "Bearer "+s.stack.OperatorToken)
	case auth == "secret":
		req.Header.Set(wire.HeaderFleetSecret, s.stack.FleetSecrets["render"])
	case auth != "":
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		s.t.Fatalf("%s %s = %d %s", method, path, res.StatusCode, raw)
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			s.t.Fatal(err)
		}
	}
	return res.StatusCode
}

// waitJob waits until dispatch has filed the job (a submission is
// accepted at once and filed by dispatch, which the event source mapping
// hands it to), looking each time dispatch has handled a batch.
func (s *consoleStack) waitJob(id string) job.Job {
	s.t.Helper()
	var j job.Job
	testenv.Eventually(s.t, "job "+id+" to be dispatched", s.stack.Dispatched(), func() bool {
		var err error
		j, err = s.stack.Store.GetJob(context.Background(), id)
		return err == nil && j.Status != job.Accepted
	})
	return j
}

// deref is a time the API may leave out, or "".
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (s *consoleStack) job(id string) job.Job {
	s.t.Helper()
	j, err := s.stack.Store.GetJob(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return j
}

func (s *consoleStack) worker(id string) worker.Worker {
	s.t.Helper()
	w, err := s.stack.Store.GetWorker(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return w
}

// TestConsoleInABrowser opens every console page in headless Chromium on a
// dev stack with real data (jobs submitted, one leased, one dead, scaler
// decisions recorded), checks what each page shows against the store,
// presses drain, cancel and retry and checks the store changed, and fails
// on any exception or console error. Screenshots go to outDir.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	bctx := browser(t)
	cfg, err := fleetconfig.Parse("console.yaml", []byte(stackConfig))
	if err != nil {
		t.Fatal(err)
	}
	stack, err := devstack.Start(context.Background(), devstack.Options{Addr: "127.0.0.1:0", Config: cfg,
		Logger: slog.New(slog.DiscardHandler), Fleet: devstack.FleetOptions{Tick: -1, NoLocalFleet: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	s := &consoleStack{t: t, stack: stack}
	ctx := context.Background()

	// Real data: five jobs of two tenants on two fleets.
	// A job's id is its tenant's (tenant.JobID): the tenant, a colon, the key.
	ids := []string{"acme:frame-0001", "globex:frame-0002", "acme:frame-0003", "globex:frame-0004", "acme:sim-0001"}
	for i, id := range ids {
		tenant, wf := "acme", "render-frame"
		if i%2 == 1 {
			tenant = "globex"
		}
		if strings.HasPrefix(id, "acme:sim") {
			wf = "sim-run"
		}
		s.call("POST", wire.PathJobs, "op", map[string]any{"job_id": id, "tenant_id": tenant, "workflow_id": wf, "input": map[string]any{"n": i}}, nil)
	}
	for _, id := range ids {
		s.waitJob(id)
	}
	tick := func() {
		t.Helper()
		if _, err := stack.Scaler.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The scaler decides on the backlog (advisory: the stack has no groups),
	// and again after the worker's leases below.
	tick()
	// A GPU worker leases one job and fails it for good (a dead letter),
	// then leases another and keeps it; a second worker stands by.
	var reg wire.RegisterResponse
	caps := json.RawMessage(`{"gpus":[{"index":0,"name":"NVIDIA A10G","uuid":"GPU-1","pci_bus_id":"00000000:00:1E.0","driver_version":"550.54.15","memory_mib":23028}]}`)
	s.call("POST", wire.PathRegister, "secret", map[string]any{"worker_id": "w-gpu-1", "fleet_slug": "render", "stage": "console", "max_concurrency": 2,
		"instance_id": "i-0a1", "instance_type": "g5.xlarge", "availability_zone": "us-east-1a", "capabilities": caps}, &reg)
	s.call("POST", wire.PathRegister, "secret", map[string]any{"worker_id": "w-gpu-2", "fleet_slug": "render", "stage": "console",
		"instance_id": "i-0a2", "instance_type": "g5.xlarge", "availability_zone": "us-east-1b"}, nil)
	var first, second wire.PollResponse
	s.call("POST", wire.PathPoll, reg.Token, map[string]any{}, &first)
	no := false
	s.call("POST", wire.PathFail, reg.Token, map[string]any{"job_id": first.Job.JobID, "lease_token": first.Job.LeaseToken,
		"error": map[string]any{"message": "CUDA out of memory", "code": "oom", "retryable": &no}}, nil)
	s.call("POST", wire.PathPoll, reg.Token, map[string]any{}, &second)
	dead, leased := first.Job.JobID, second.Job.JobID
	if st := s.job(dead).Status; st != job.Dead {
		t.Fatalf("job %s is %s after a non-retryable failure, want dead", dead, st)
	}
	tick()
	var fleets wire.FleetsResponse
	s.call("GET", wire.PathAdminFleets+"?history=true", "op", nil, &fleets)

	// The browser: sign in through the console session route.
	var login wire.ConsoleSessionResponse
	s.call("POST", wire.PathAdminConsoleSession, "op", wire.Empty{}, &login)
	tab, closeTab := chromedp.NewContext(bctx)
	defer closeTab()
	// Every console message, exception and browser log entry of the tab.
	var (
		mu       sync.Mutex
		problems []string
		done     = make(chan struct{})
	)
	messages := chromedp.Console(tab)
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s (%s)", m, m.URL))
				mu.Unlock()
			}
		}
	}()
	tab, cancel := context.WithTimeout(tab, 60*time.Second)
	defer cancel()
	dir := outDir(t)
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tt *chromedp.Target) error {
			buf, err := chromedp.FullScreenshot(100)(ctx, tt)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644)
		})
	}
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(tab, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(tab, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	count := func(sel string) int {
		t.Helper()
		nodes, err := chromedp.Run(tab, chromedp.Nodes(chromedp.CSSAll(sel), chromedp.AtLeast(0)))
		if err != nil {
			t.Fatalf("count %s: %v", sel, err)
		}
		return len(nodes)
	}
	location := func() string {
		t.Helper()
		u, err := chromedp.Run(tab, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return u
	}

	// Fleets: the admin route's numbers, and the chart of the decisions.
	run("log in", chromedp.Navigate(stack.URL+login.Path), chromedp.WaitVisible(chromedp.CSS("#fleets")))
	if url := location(); !strings.HasSuffix(url, "/console/fleets") {
		t.Fatalf("the login landed on %s, want the fleets page", url)
	}
	for _, f := range fleets.Fleets {
		row := fmt.Sprintf(`tr[data-fleet=%q] `, f.FleetSlug)
		for cls, want := range map[string]int{"queued": f.Queued, "leased": f.Leased, "desired": f.Desired, "inservice": f.InService} {
			if got := text(row + "td." + cls); got != fmt.Sprint(want) {
				t.Errorf("fleet %s %s = %q, the admin route says %d", f.FleetSlug, cls, got, want)
			}
		}
		chart := fmt.Sprintf(`svg.chart[data-fleet=%q] `, f.FleetSlug)
		// Each series is a line as the browser draws it: an unfilled
		// polyline with a stroke and one point per decision.
		type shape struct {
			Class, Fill, Stroke string
			Points              int
		}
		shapes, err := chromedp.Run(tab, chromedp.Evaluate[[]shape](fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(p => {
			const s = getComputedStyle(p);
			return {Class: p.getAttribute("class"), Fill: s.fill, Stroke: s.stroke, Points: p.points.numberOfItems};
		})`, chart+"polyline")))
		if err != nil {
			t.Fatalf("read fleet %s's chart: %v", f.FleetSlug, err)
		}
		if len(shapes) != 3 {
			t.Errorf("fleet %s chart has %d lines, want desired, in service and queued+leased", f.FleetSlug, len(shapes))
		}
		for _, s := range shapes {
			if s.Fill != "none" || s.Stroke == "none" || s.Stroke == "" || s.Points != len(f.History) {
				t.Errorf("fleet %s chart's %s series is %+v, want an unfilled stroked line through %d points", f.FleetSlug, s.Class, s, len(f.History))
			}
		}
		if n := count(chart + "g.decision"); n != len(f.History) || n < 2 && f.FleetSlug == "render" {
			t.Errorf("fleet %s chart has %d decisions, the store has %d", f.FleetSlug, n, len(f.History))
		}
		if got := text(chart + "g.decision:last-of-type > title"); !strings.Contains(got, f.History[0].Reason) {
			t.Errorf("fleet %s: the newest decision's hover is %q, want its reason %q", f.FleetSlug, got, f.History[0].Reason)
		}
	}
	run("fleets screenshot", shot("fleets"))

	// Workers: status, GPU and leases; drain the idle one.
	run("workers", chromedp.Navigate(stack.URL+"/console/workers"), chromedp.WaitVisible(chromedp.CSS("#workers")))
	if got := text(`tr[data-worker="w-gpu-1"] td.gpus`); !strings.Contains(got, "NVIDIA A10G") || !strings.Contains(got, "23028 MiB") {
		t.Errorf("w-gpu-1's GPUs = %q, want the A10G it reported", got)
	}
	if got, want := text(`tr[data-worker="w-gpu-1"] td.leases`), fmt.Sprintf("%d / 2", s.worker("w-gpu-1").Leases); !strings.HasPrefix(got, want) {
		t.Errorf("w-gpu-1's leases = %q, want %q", got, want)
	}
	run("workers screenshot", shot("workers"))
	run("drain", chromedp.Click(chromedp.CSS(`tr[data-worker="w-gpu-2"] button[name=drain]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-worker="w-gpu-2"] .st-draining`)))
	if st := s.worker("w-gpu-2").Status; st != worker.Draining {
		t.Errorf("w-gpu-2 is %s after Drain, want draining", st)
	}

	// Jobs: the tenant filter, then a queued job's cancel.
	run("jobs", chromedp.Navigate(stack.URL+"/console/jobs"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
	if n := count("#jobs tr[data-job]"); n != len(ids) {
		t.Errorf("the jobs page lists %d jobs, want all %d", n, len(ids))
	}
	run("filter by tenant", chromedp.SetValue(chromedp.CSS(`#filters input[name=tenant]`), "globex"),
		chromedp.Click(chromedp.CSS(`#filters button`)),
		// the reloaded page renders the filter it applied
		chromedp.WaitVisible(chromedp.CSS(`#filters input[name=tenant][value="globex"]`)))
	url := location()
	var globex []string
	for _, id := range ids {
		if s.job(id).TenantID == "globex" {
			globex = append(globex, id)
		}
	}
	if n := count("#jobs tr[data-job]"); n != len(globex) || !strings.Contains(url, "tenant=globex") {
		t.Errorf("filtered by tenant globex (%s): %d rows, want %v", url, n, globex)
	}
	for _, id := range globex {
		if count(fmt.Sprintf(`#jobs tr[data-job=%q]`, id)) != 1 {
			t.Errorf("globex's job %s is not listed", id)
		}
	}
	run("jobs screenshot", shot("jobs"))

	// A queued job: the jobs list shows its expected start (a dash when the
	// estimate cannot say), its page what it waits on, how the estimate was
	// made and its place in line, as GET /api/jobs/{job_id} answers them.
	var queued string
	for _, id := range ids {
		if s.job(id).Status == job.Queued && s.job(id).FleetSlug == "render" {
			queued = id
			break
		}
	}
	var est wire.Job
	s.call("GET", strings.Replace(wire.PathJob, "{job_id}", queued, 1), "op", nil, &est)
	if est.WaitingOn == nil || est.EstimateBasis == "" || est.Position < 1 {
		t.Fatalf("the API answers queued job %s without its estimate: %+v", queued, est)
	}
	run("jobs with estimates", chromedp.Navigate(stack.URL+"/console/jobs"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
	got := text(fmt.Sprintf(`#jobs tr[data-job=%q] td.estimate`, queued))
	if known := est.EstimatedStartAt != nil; got == "" || (got == "—") == known {
		t.Errorf("job %s's expected start in the list is %q; the API's is %v", queued, got, deref(est.EstimatedStartAt))
	}
	run("queued job page", chromedp.Navigate(stack.URL+"/console/jobs/"+queued), chromedp.WaitVisible(chromedp.CSS("#waiting-on")))
	if got := text("#waiting-on"); !strings.Contains(got, "("+est.WaitingOn.Code+")") || !strings.Contains(got, est.WaitingOn.Text[:min(10, len(est.WaitingOn.Text))]) {
		t.Errorf("job %s waits on %q on its page; the API says %s: %s", queued, got, est.WaitingOn.Code, est.WaitingOn.Text)
	}
	if got := text("#position"); got != fmt.Sprint(est.Position) {
		t.Errorf("job %s's place in line is %q on its page; the API says %d", queued, got, est.Position)
	}
	if got := text("#estimate"); !strings.Contains(got, "("+est.EstimateBasis+")") {
		t.Errorf("job %s's expected start is %q on its page; the API's basis is %s", queued, got, est.EstimateBasis)
	}
	run("queued job screenshot", shot("job-queued"))

	// A leased job's page: its history timeline, as the store has it.
	run("job page", chromedp.Navigate(stack.URL+"/console/jobs/"+leased), chromedp.WaitVisible(chromedp.CSS("#history")))
	lj := s.job(leased)
	if got := text("#status"); got != string(lj.Status) {
		t.Errorf("job %s shows status %q, the store says %s", leased, got, lj.Status)
	}
	if n := count("#history li"); n != len(lj.History) {
		t.Errorf("job %s's timeline has %d entries, the store %d", leased, n, len(lj.History))
	}
	run("job screenshot", shot("job"))
	run("cancel", chromedp.Click(chromedp.CSS(`button[name=cancel]`)), chromedp.WaitVisible(chromedp.CSS(`#status.st-canceled`)))
	if st := s.job(leased).Status; st != job.Canceled {
		t.Errorf("job %s is %s after Cancel, want canceled", leased, st)
	}

	// Dead letters: retry the failed job from the list.
	run("dead letters", chromedp.Navigate(stack.URL+"/console/jobs?status=dead"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
	if count(fmt.Sprintf(`#jobs tr[data-job=%q]`, dead)) != 1 || count("#jobs tr[data-job]") != 1 {
		t.Errorf("dead letters should list exactly %s", dead)
	}
	if got := text(fmt.Sprintf(`#jobs tr[data-job=%q]`, dead)); !strings.Contains(got, "oom") {
		t.Errorf("dead letter row %q does not show the error code", got)
	}
	run("dead letters screenshot", shot("dead-letters"))
	run("retry", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-job=%q] button[name=retry]`, dead))), chromedp.WaitVisible(chromedp.CSS("#nojobs")))
	if st := s.job(dead).Status; st != job.Queued {
		t.Errorf("job %s is %s after Retry, want queued", dead, st)
	}

	closeTab()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
}
