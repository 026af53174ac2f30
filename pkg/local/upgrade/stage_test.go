package upgrade_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// A dev stack, of either release, makes up the names of its table, queues
// and bucket: fleetq-<stage>-<six random characters>, then the rest
// (-submissions, -assets). In AWS the stack keeps its resources' names
// across a deploy; here each release's AWS endpoints are a stageAWS proxy
// that maps the names its dev stack made up onto the stage's own, so both
// releases' unchanged wiring works on one table, one queue and one bucket.
var madeUpName = regexp.MustCompile(`fleetq-dev-[a-z0-9]{6}\b`)

// quiet is where the proxies' own error log goes: a request to a process
// that has stopped is answered 502 and is no news.
var quiet = log.New(io.Discard, "", 0)

// stageBase is the stage's names' common part (fleetq-dev-upgrade, its
// table; -submissions, its queue; -assets, its bucket): not itself a name
// madeUpName matches.
const stageBase = "fleetq-dev-upgrade"

// stageAWS is one release's view of one AWS API (DynamoDB, SQS or S3) of the
// stage: a proxy to the embedded server that every process of the release
// calls through.
type stageAWS struct {
	srv *httptest.Server

	// receives is the gate of SQS ReceiveMessage: while it is closed a
	// receive waits (the release's event source mapping takes nothing from
	// the queue); inflight counts receives forwarded and not answered.
	mu       sync.Mutex
	closed   chan struct{}
	inflight int
	idle     *sync.Cond

	// outboxDown fails the release's reads of its job-event outbox
	// (DynamoDB Query of EVENT#<job> or of the E# index) with a 500, as a
	// throttled or failing table would: its events stay in the outbox.
	outboxDown atomic.Bool
}

func newStageAWS(t *testing.T, upstream string) *stageAWS {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &stageAWS{}
	p.idle = sync.NewCond(&p.mu)
	rp := &httputil.ReverseProxy{
		ErrorLog: quiet,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			// CreateBucket of the stage's bucket, which exists: the
			// release's stack finds it made, as a deploy does.
			req := resp.Request
			if req.Method == http.MethodPut && strings.Count(strings.Trim(req.URL.Path, "/"), "/") == 0 &&
				req.URL.RawQuery == "" && resp.StatusCode == http.StatusConflict {
				resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
				resp.Body = io.NopCloser(strings.NewReader(""))
				resp.ContentLength = 0
				resp.Header.Del("Content-Length")
			}
			return nil
		},
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = madeUpName.ReplaceAll(body, []byte(stageBase))
		r.URL.Path = madeUpName.ReplaceAllString(r.URL.Path, stageBase)
		r.URL.RawPath = ""
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		r.Header.Del("Content-Length")
		target := r.Header.Get("X-Amz-Target")
		switch {
		case strings.HasSuffix(target, ".ReceiveMessage"):
			if !p.enterReceive(r.Context()) {
				http.Error(w, "the release stopped", http.StatusServiceUnavailable)
				return
			}
			defer p.leaveReceive()
		case strings.HasSuffix(target, ".Query") && p.outboxDown.Load() &&
			(bytes.Contains(body, []byte(`{"S":"EVENT#`)) || bytes.Contains(body, []byte(`{"S":"E#"}`))):
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"the outbox is unavailable"}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the endpoint the release's processes are given.
func (p *stageAWS) URL() string { return p.srv.URL }

// enterReceive waits while the receive gate is closed, then counts the
// receive in flight; false when the caller went away first.
func (p *stageAWS) enterReceive(ctx context.Context) bool {
	for {
		p.mu.Lock()
		gate := p.closed
		if gate == nil {
			p.inflight++
			p.mu.Unlock()
			return true
		}
		p.mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return false
		}
	}
}

func (p *stageAWS) leaveReceive() {
	p.mu.Lock()
	p.inflight--
	p.idle.Broadcast()
	p.mu.Unlock()
}

// holdReceives closes the receive gate and waits until no receive is under
// way: from then on nothing the release's dispatch could see leaves the queue.
func (p *stageAWS) holdReceives() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed == nil {
		p.closed = make(chan struct{})
	}
	for p.inflight > 0 {
		p.idle.Wait()
	}
}

// releaseReceives opens the receive gate again.
func (p *stageAWS) releaseReceives() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed != nil {
		close(p.closed)
		p.closed = nil
	}
}

// front is the stage's API URL, the same before, during and after the deploy
// (API Gateway's): it forwards to the API of the release deployed, and
// counts the requests each release's API was sent, by path.
type front struct {
	srv *httptest.Server

	mu      sync.Mutex
	name    string
	backend *httputil.ReverseProxy
	seen    map[string]int // "<release> <path>"
	changed chan struct{}
}

func newFront(t *testing.T) *front {
	t.Helper()
	f := &front{seen: map[string]int{}, changed: make(chan struct{}, 1)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		name, b := f.name, f.backend
		f.seen[name+" "+r.URL.Path]++
		f.mu.Unlock()
		select {
		case f.changed <- struct{}{}:
		default:
		}
		if b == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"no API deployed"}}`)
			return
		}
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// deploy sends every later request to the API at apiURL, release name's.
func (f *front) deploy(t *testing.T, name, apiURL string) {
	t.Helper()
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := httputil.NewSingleHostReverseProxy(u)
	// A request to a stopped API is answered 502, as API Gateway answers
	// a function that failed; the agents log it.
	rp.ErrorLog = quiet
	f.name, f.backend = name, rp
}

// count is how many requests for path release name's API was sent.
func (f *front) count(name, path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[name+" "+path]
}

// process is a release's binary running as a child of the test, its output
// in a file the test logs when it fails.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start runs bin with args and the environment env (on top of a minimal
// one), and answers once it runs; the process is stopped when the test ends.
func start(t *testing.T, name, bin string, env []string, args ...string) *process {
	t.Helper()
	p := &process{name: name, log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_EC2_METADATA_DISABLED=true"}, env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("%s's output:\n%s", name, tail(b, 6000))
		}
	})
	return p
}

// stop interrupts the process (SIGINT: a dev stack shuts down, an agent
// drains) and waits for it to exit; after testenv.Patience it kills it.
func (p *process) stop(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	timer := time.NewTimer(testenv.Patience)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not exit within %s of SIGINT; killed", p.name, testenv.Patience)
	}
}

// exited reports whether the process has exited, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// output is what the process has written so far.
func (p *process) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// waitLine waits for a line of the process's output that re matches and
// answers its submatches.
func (p *process) waitLine(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	testenv.Eventually(t, p.name+"'s output line "+re.String(), testenv.Ticks(t, 20*time.Millisecond), func() bool {
		if done, err := p.exited(); done {
			t.Fatalf("%s exited (%v) before writing %s:\n%s", p.name, err, re, tail([]byte(p.output()), 4000))
		}
		sc := bufio.NewScanner(strings.NewReader(p.output()))
		for sc.Scan() {
			if m = re.FindStringSubmatch(sc.Text()); m != nil {
				return true
			}
		}
		return false
	})
	return m
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// releaseAWS is one release's view of the stage's AWS APIs.
type releaseAWS struct {
	ddb, sqs, s3 *stageAWS
}

// environ is the environment a release's `fleetq dev` gets: its AWS APIs.
func (r releaseAWS) environ() []string {
	return []string{
		"FLEETQ_DYNAMODB_ENDPOINT=" + r.ddb.URL(),
		"FLEETQ_SQS_ENDPOINT=" + r.sqs.URL(),
		"FLEETQ_S3_ENDPOINT=" + r.s3.URL(),
	}
}
