package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/jobevent"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/webhook"
)

const (
	fleetSecret = "fleet-secret-for-tests"
	webhookKey  = "webhook-key-for-tests"
)

// keySource is a webhook key ring a test can rotate.
type keySource struct {
	mu   sync.Mutex
	ring signing.Ring
}

func (k *keySource) SigningKeys(context.Context, string) (signing.Ring, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ring, nil
}

func (k *keySource) use(secret string) {
	key, _ := signing.NewKey(secret)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ring = signing.Ring{Current: key}
}

// receiverKeys is what a receiver holds: the webhook key alone.
func receiverKeys(t *testing.T) signing.Ring {
	t.Helper()
	ring, err := signing.NewStatic(webhookKey)
	if err != nil {
		t.Fatal(err)
	}
	return signing.Ring(ring)
}

// hookEnv is the composition root's Env on the embedded DynamoDB, a fake
// clock and a deliverer of its store's callbacks.
type hookEnv struct {
	t    *testing.T
	ctx  context.Context
	clk  *clock.Fake
	sys  *system.Env
	d    *webhook.Deliverer
	keys *keySource
}

func newHookEnv(t *testing.T, guard webhook.Guard, timeout time.Duration, maxAttempts int) *hookEnv {
	t.Helper()
	cfg, err := fleetconfig.Parse("hooks.yaml", []byte(`
stage: test
webhooks:
  allowed_hosts: [127.0.0.1, localhost]
fleets:
  - slug: gpu
    workflows: [wf]
    instance_types: [g5.xlarge]
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Webhooks.MaxAttempts = maxAttempts
	cfg.Webhooks.Timeout = fleetconfig.Duration(timeout)
	client, table := testenv.DynamoDB(t)
	clk := clock.NewFake(t0)
	log := slog.New(slog.DiscardHandler)
	sys, err := system.New(cfg, client, table, clk, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := &keySource{}
	keys.use(webhookKey)
	d, err := webhook.NewDeliverer(cfg.Webhooks, sys.Store, keys, guard, clk, log)
	if err != nil {
		t.Fatal(err)
	}
	return &hookEnv{t: t, ctx: context.Background(), clk: clk, sys: sys, keys: keys, d: d}
}

type discard struct{}

func (discard) Publish(context.Context, []jobevent.Event) error { return nil }

// finish creates a job with a callback URL, cancels it and relays its
// outcome, which files the callback.
func (e *hookEnv) finish(id, callback string) {
	e.t.Helper()
	if _, _, err := e.sys.Store.CreateJob(e.ctx, job.Spec{ID: id, TenantID: "t1", WorkflowID: "wf", Input: json.RawMessage(`{}`), CallbackURL: callback}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.sys.Store.Cancel(e.ctx, id); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.sys.Store.RelayJob(e.ctx, discard{}, id); err != nil {
		e.t.Fatal(err)
	}
}

func (e *hookEnv) deliver() int {
	e.t.Helper()
	n, err := e.d.Deliver(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *hookEnv) callback(id string) job.Callback {
	e.t.Helper()
	j, err := e.sys.Store.GetJob(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if j.Callback == nil {
		e.t.Fatalf("job %s has no callback state", id)
	}
	return *j.Callback
}

// scripted answers each request with the next status of its script (the
// last one repeats); a status of 0 holds the request until the client
// gives up.
func scripted(t *testing.T, statuses ...int) (*httptest.Server, func() []received) {
	var mu sync.Mutex
	var got []received
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(got)
		got = append(got, received{r.URL.Path, r.Header.Clone(), body})
		mu.Unlock()
		st := statuses[min(n, len(statuses)-1)]
		if st == 0 {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.WriteHeader(st)
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv, func() []received { mu.Lock(); defer mu.Unlock(); return append([]received(nil), got...) }
}

func TestCallbackIsDeliveredSignedAndRecorded(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, webhook.Guard{AllowLoopback: true}, 5*time.Second, 3)
	srv, got := scripted(t, http.StatusOK)
	e.finish("j1", srv.URL+"/hooks/fleetq?token=receiver-own")
	if n := e.deliver(); n != 1 {
		t.Fatalf("delivered %d, want 1", n)
	}
	r := got()
	if len(r) != 1 || r[0].path != "/hooks/fleetq" {
		t.Fatalf("received %+v", r)
	}
	// The receiver verifies with the webhook key, which the delivery names.
	if err := webhook.Verify(receiverKeys(t), r[0].header, r[0].body, e.clk.Now(), 5*time.Minute); err != nil {
		t.Fatalf("the receiver cannot verify the delivery: %v", err)
	}
	if got := r[0].header.Get(webhook.HeaderKeyID); got != signing.KeyID(webhookKey) {
		t.Fatalf("key id %q, want the webhook key's %q", got, signing.KeyID(webhookKey))
	}
	var d webhook.Delivery
	if err := json.Unmarshal(r[0].body, &d); err != nil {
		t.Fatal(err)
	}
	if d.Detail.JobID != "j1" || d.Detail.Status != "canceled" || d.Type != jobevent.Canceled || r[0].header.Get(webhook.HeaderEventID) != d.ID {
		t.Fatalf("delivery %+v, headers %v", d, r[0].header)
	}
	c := e.callback("j1")
	if c.State != job.CallbackDelivered || c.Attempts != 1 || !c.DeliveredAt.Equal(e.clk.Now()) || c.EventID != d.ID {
		t.Fatalf("recorded %+v", c)
	}
	if n := e.deliver(); n != 0 || len(got()) != 1 {
		t.Fatalf("delivered again: %d, %d requests", n, len(got()))
	}
}

func TestFailingReceiverIsRetriedAfterBackoff(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, webhook.Guard{AllowLoopback: true}, 5*time.Second, 3)
	srv, got := scripted(t, http.StatusInternalServerError, http.StatusOK)
	e.finish("j1", srv.URL+"/h")
	if n := e.deliver(); n != 0 {
		t.Fatalf("delivered %d on a 500", n)
	}
	c := e.callback("j1")
	wait := webhook.DefaultBackoff(1)
	if c.State != job.CallbackPending || c.Attempts != 1 || c.LastError != "the receiver answered 500" || !c.NextAttemptAt.Equal(e.clk.Now().Add(wait)) {
		t.Fatalf("after a 500: %+v", c)
	}
	e.clk.Advance(wait - time.Second)
	if e.deliver(); len(got()) != 1 {
		t.Fatalf("retried before its backoff: %d requests", len(got()))
	}
	e.clk.Advance(time.Second)
	if n := e.deliver(); n != 1 {
		t.Fatalf("delivered %d after the backoff", n)
	}
	r := got()
	if len(r) != 2 || r[0].header.Get(webhook.HeaderEventID) != r[1].header.Get(webhook.HeaderEventID) {
		t.Fatalf("requests %d; the event id must stay the same across attempts", len(r))
	}
	if err := webhook.Verify(receiverKeys(t), r[1].header, r[1].body, e.clk.Now(), time.Minute); err != nil {
		t.Fatalf("retry signature: %v", err)
	}
	if c := e.callback("j1"); c.State != job.CallbackDelivered || c.Attempts != 2 || c.LastError != "" {
		t.Fatalf("after the retry: %+v", c)
	}
}

func TestSlowReceiverTimesOutAndIsRetried(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, webhook.Guard{AllowLoopback: true}, time.Second, 3)
	srv, got := scripted(t, 0, http.StatusNoContent)
	e.finish("j1", srv.URL+"/slow")
	if n := e.deliver(); n != 0 {
		t.Fatalf("delivered %d to a receiver that never answered", n)
	}
	c := e.callback("j1")
	if c.State != job.CallbackPending || c.Attempts != 1 || c.LastError != webhook.ErrUnreachable.Error() {
		t.Fatalf("after a timeout: %+v", c)
	}
	e.clk.Advance(webhook.DefaultBackoff(1))
	if n := e.deliver(); n != 1 || len(got()) != 2 {
		t.Fatalf("retry delivered %d with %d requests", n, len(got()))
	}
}

func TestCallbackGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, webhook.Guard{AllowLoopback: true}, 5*time.Second, 3)
	srv, got := scripted(t, http.StatusBadGateway)
	e.finish("j1", srv.URL+"/down")
	for n := 1; n <= 3; n++ {
		e.deliver()
		if len(got()) != n {
			t.Fatalf("attempt %d: %d requests", n, len(got()))
		}
		e.clk.Advance(webhook.DefaultBackoff(n))
	}
	c := e.callback("j1")
	if c.State != job.CallbackFailed || c.Attempts != 3 || c.LastError != "the receiver answered 502" || c.FailedAt.IsZero() {
		t.Fatalf("after 3 failures: %+v", c)
	}
	e.clk.Advance(time.Hour)
	if e.deliver(); len(got()) != 3 {
		t.Fatalf("tried again after giving up: %d requests", len(got()))
	}
}

func TestDeliveryRefusesInternalAddressesAndRedirects(t *testing.T) {
	t.Parallel()
	// The guard of AWS: a name whose DNS answer is loopback is refused at
	// connect time, and a redirect is not followed.
	e := newHookEnv(t, webhook.Guard{}, 5*time.Second, 1)
	srv, got := scripted(t, http.StatusOK)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	e.finish("by-name", "http://localhost:"+port+"/internal")
	e.deliver()
	if len(got()) != 0 {
		t.Fatalf("the guard let %d requests through to loopback", len(got()))
	}
	if c := e.callback("by-name"); c.State != job.CallbackFailed || !strings.Contains(c.LastError, "not a public address") {
		t.Fatalf("refused delivery recorded as %+v", c)
	}
	// Private and link-local (metadata) addresses are refused before any
	// packet leaves, even if a stage's allowed_hosts named them.
	e.finish("private", "http://10.255.255.1:9/hook")
	e.finish("metadata", "http://169.254.169.254/latest/meta-data/")
	e.deliver()
	for _, id := range []string{"private", "metadata"} {
		if c := e.callback(id); c.State != job.CallbackFailed || !strings.Contains(c.LastError, "not a public address") {
			t.Fatalf("%s: delivery recorded as %+v", id, c)
		}
	}

	open := newHookEnv(t, webhook.Guard{AllowLoopback: true}, 5*time.Second, 1)
	target, hits := scripted(t, http.StatusOK)
	redirector := httptest.NewServer(http.RedirectHandler(target.URL+"/elsewhere", http.StatusFound))
	t.Cleanup(redirector.Close)
	open.finish("redirected", redirector.URL+"/r?token=receiver-secret")
	open.deliver()
	if len(hits()) != 0 {
		t.Fatal("the redirect was followed")
	}
	if c := open.callback("redirected"); c.State != job.CallbackFailed || !strings.Contains(c.LastError, "follow no redirect") {
		t.Fatalf("redirect recorded as %+v", c)
	}
	if c := open.callback("redirected"); strings.Contains(c.LastError, "receiver-secret") {
		t.Fatalf("the recorded error shows the URL's query: %q", c.LastError)
	}
}

func TestOnePassDeliversBatchAfterBatch(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, webhook.Guard{AllowLoopback: true}, 5*time.Second, 3)
	srv, got := scripted(t, http.StatusOK)
	const jobs = 40 // more than two batches
	for i := range jobs {
		e.finish(fmt.Sprintf("j%02d", i), srv.URL+"/many")
	}
	if n := e.deliver(); n != jobs || len(got()) != jobs {
		t.Fatalf("one pass delivered %d with %d requests, want %d", n, len(got()), jobs)
	}
}

// TestLastErrorDoesNotTellOpenPortsFromClosed: a producer reads
// callback.last_error, so every delivery that got no HTTP answer records
// the same words — a closed port, a port whose service hangs up, one that
// speaks something other than HTTP, plain HTTP where TLS was asked for,
// and one that never answers. Only an HTTP status is told apart.
func TestLastErrorDoesNotTellOpenPortsFromClosed(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, webhook.Guard{AllowLoopback: true}, time.Second, 1)
	closed := listen(t)
	closedAddr := closed.Addr().String()
	closed.Close()
	hangsUp := serveTCP(t, func(c net.Conn) { c.Close() })
	banner := serveTCP(t, func(c net.Conn) { _, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n")); c.Close() })
	silent := serveTCP(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	plain, _ := scripted(t, http.StatusOK)
	targets := map[string]string{
		"closed":   "http://" + closedAddr + "/h",
		"hangs-up": "http://" + hangsUp + "/h",
		"banner":   "http://" + banner + "/h",
		"silent":   "http://" + silent + "/h",
		"no-tls":   strings.Replace(plain.URL, "http://", "https://", 1) + "/h",
	}
	for id, u := range targets {
		e.finish(id, u)
	}
	e.deliver()
	for id := range targets {
		c := e.callback(id)
		if c.State != job.CallbackFailed || c.LastError != webhook.ErrUnreachable.Error() {
			t.Errorf("%s: recorded %q (%s), want %q", id, c.LastError, c.State, webhook.ErrUnreachable.Error())
		}
	}
	answered, _ := scripted(t, http.StatusNotFound)
	e.finish("answered", answered.URL+"/h")
	e.deliver()
	if c := e.callback("answered"); c.LastError != "the receiver answered 404" {
		t.Errorf("an HTTP answer: recorded %q", c.LastError)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// serveTCP accepts connections on loopback and hands each to handle.
func serveTCP(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln := listen(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); handle(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// A receiver holding the current and the previous webhook key accepts a
// delivery signed with the previous one (a function that has not yet read
// the new key) only until the rotation window ends, and one signed with
// any other key never: the fleet secret, a key derived from it, the
// console key.
func TestOldKeyVerifiesOnlyDuringTheRotationWindow(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, webhook.Guard{AllowLoopback: true}, 5*time.Second, 3)
	srv, got := scripted(t, http.StatusOK, http.StatusOK, http.StatusOK, http.StatusOK, http.StatusOK)
	oldKey, _ := signing.NewKey(webhookKey)
	newKey, _ := signing.NewKey("webhook-key-after-rotation")
	rotatedAt := e.clk.Now()
	receiver := signing.Ring{Current: newKey, Previous: oldKey, PreviousUntil: rotatedAt.Add(time.Hour)}

	deliver := func(id, secret string) received {
		t.Helper()
		e.keys.use(secret)
		e.finish(id, srv.URL+"/h")
		if n := e.deliver(); n != 1 {
			t.Fatalf("%s: delivered %d", id, n)
		}
		r := got()
		return r[len(r)-1]
	}
	// Within the window: both keys verify.
	e.clk.Advance(59 * time.Minute)
	for _, secret := range []string{webhookKey, "webhook-key-after-rotation"} {
		r := deliver("in-"+secret, secret)
		if err := webhook.Verify(receiver, r.header, r.body, e.clk.Now(), 5*time.Minute); err != nil {
			t.Errorf("signed with %s within the window: %v", secret, err)
		}
	}
	// After it: only the current key, though the timestamp is fresh.
	e.clk.Advance(time.Minute)
	old := deliver("after-old", webhookKey)
	if err := webhook.Verify(receiver, old.header, old.body, e.clk.Now(), 5*time.Minute); !errors.Is(err, webhook.ErrBadSignature) {
		t.Errorf("signed with the old key after the window: %v, want ErrBadSignature", err)
	}
	cur := deliver("after-new", "webhook-key-after-rotation")
	if err := webhook.Verify(receiver, cur.header, cur.body, e.clk.Now(), 5*time.Minute); err != nil {
		t.Errorf("signed with the current key after the window: %v", err)
	}
	// No other key verifies, whatever key id it names.
	m := hmac.New(sha256.New, []byte(fleetSecret))
	m.Write([]byte("fleetq-webhook-signing-v1"))
	derived := hex.EncodeToString(m.Sum(nil)) // how the key was once derived from the fleet secret
	for name, forged := range map[string]string{"the fleet secret": fleetSecret, "a key derived from the fleet secret": derived, "the console key": "console-key-for-tests"} {
		r := deliver("forged-"+strings.ReplaceAll(name, " ", "-"), forged)
		for _, kid := range []string{r.header.Get(webhook.HeaderKeyID), newKey.ID, oldKey.ID} {
			h := r.header.Clone()
			h.Set(webhook.HeaderKeyID, kid)
			if err := webhook.Verify(receiver, h, r.body, e.clk.Now(), 5*time.Minute); err == nil {
				t.Errorf("a delivery signed with %s naming key %s verified", name, kid)
			}
		}
	}
}
