package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Kind is one way a call fails.
type Kind string

// The faults the proxy injects.
const (
	// Throttle answers the protocol's throttling error without forwarding:
	// ProvisionedThroughputExceededException for DynamoDB,
	// ThrottlingException for other JSON services, Throttling for Query ones.
	Throttle Kind = "throttle"
	// ServerError answers 500 InternalServerError without forwarding.
	ServerError Kind = "server_error"
	// Unavailable answers 503 ServiceUnavailable without forwarding.
	Unavailable Kind = "unavailable"
	// ResetBefore resets the connection before forwarding: nothing happened.
	ResetBefore Kind = "reset_before"
	// ResetAfter forwards the request, lets the service act on it, then
	// resets the connection instead of answering: the write happened but the
	// caller cannot know.
	ResetAfter Kind = "reset_after"
	// Delay forwards the request after a pause (Options.Delay).
	Delay Kind = "delay"
)

// Kinds lists every kind.
var Kinds = []Kind{Throttle, ServerError, Unavailable, ResetBefore, ResetAfter, Delay}

// Options configure random faults.
type Options struct {
	// Rate is the share of calls (0..1) that get a random fault.
	Rate float64
	// Kinds are the faults drawn from (default: all).
	Kinds []Kind
	// Ops limits random faults to these operations (default: all).
	Ops []string
	// Delay is how long a Delay fault waits (default 50ms).
	Delay time.Duration
	// Seed makes the draw repeatable (0: random).
	Seed uint64
	// Forwarded, when set, is called with the operation of each request
	// after the service has answered it (whether or not the answer then
	// reached the caller): a signal that the service's state may have changed.
	Forwarded func(op string)
}

// Proxy forwards every request to its target and injects faults: the ones
// queued with Next first, then random ones at Options.Rate.
type Proxy struct {
	// URL is the proxy's address; point an SDK client's BaseEndpoint at it.
	URL string

	target *url.URL
	rp     *httputil.ReverseProxy
	srv    *http.Server
	done   chan struct{}

	mu     sync.Mutex
	opts   Options
	rnd    *rand.Rand
	queued map[string][]Kind
	counts map[Kind]int
	calls  map[string]int
}

// Start starts a proxy for target on a free loopback port.
func Start(target string, o Options) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q is not a URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), target: u, done: make(chan struct{}),
		queued: map[string][]Kind{}, counts: map[Kind]int{}, calls: map[string]int{}}
	p.rp = httputil.NewSingleHostReverseProxy(u)
	// Concurrent callers keep their connections to the service (the
	// default transport keeps two per host and would open one per call).
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	p.rp.Transport = transport
	p.rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		writeError(w, r, http.StatusBadGateway, "BadGateway", err.Error())
	}
	p.SetOptions(o)
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	<-p.done
	return err
}

// SetOptions changes the random faults (a Rate of 0 turns them off).
func (p *Proxy) SetOptions(o Options) {
	if len(o.Kinds) == 0 {
		o.Kinds = Kinds
	}
	if o.Delay <= 0 {
		o.Delay = 50 * time.Millisecond
	}
	seed := o.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opts = o
	p.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Next queues faults for the next calls of an operation ("TransactWriteItems",
// "ReceiveMessage", "SetDesiredCapacity"; "" for any), one call each, in order.
func (p *Proxy) Next(op string, kinds ...Kind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queued[op] = append(p.queued[op], kinds...)
}

// Counts returns how many faults of each kind were injected.
func (p *Proxy) Counts() map[Kind]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Kind]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Calls returns how many requests each operation received (faulted or not).
func (p *Proxy) Calls(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[op]
}

// Operation names an AWS call from its request: the X-Amz-Target of the
// JSON protocols ("DynamoDB_20120810.PutItem" is "PutItem"), else the Query
// protocol's Action. The body is read and put back.
func Operation(r *http.Request) string {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		if i := strings.LastIndexByte(t, '.'); i >= 0 {
			return t[i+1:]
		}
		return t
	}
	if r.Body == nil {
		return ""
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	v, _ := url.ParseQuery(string(body))
	return v.Get("Action")
}

func (p *Proxy) draw(op string) (Kind, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[op]++
	for _, key := range []string{op, ""} {
		if q := p.queued[key]; len(q) > 0 {
			p.queued[key] = q[1:]
			p.counts[q[0]]++
			return q[0], true
		}
	}
	if p.opts.Rate <= 0 || p.rnd.Float64() >= p.opts.Rate {
		return "", false
	}
	if len(p.opts.Ops) > 0 {
		ok := false
		for _, o := range p.opts.Ops {
			ok = ok || o == op
		}
		if !ok {
			return "", false
		}
	}
	k := p.opts.Kinds[p.rnd.IntN(len(p.opts.Kinds))]
	p.counts[k]++
	return k, true
}

// ServeHTTP forwards one request, or fails it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := Operation(r)
	kind, fault := p.draw(op)
	if !fault {
		p.rp.ServeHTTP(w, r)
		p.forwarded(op)
		return
	}
	switch kind {
	case ResetAfter, Delay:
		defer p.forwarded(op)
	}
	switch kind {
	case Throttle:
		code := "ThrottlingException"
		switch {
		case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_"):
			code = "ProvisionedThroughputExceededException"
		case r.Header.Get("X-Amz-Target") == "":
			code = "Throttling"
		}
		writeError(w, r, http.StatusBadRequest, code, "Rate exceeded")
	case ServerError:
		writeError(w, r, http.StatusInternalServerError, "InternalServerError", "Internal server error")
	case Unavailable:
		writeError(w, r, http.StatusServiceUnavailable, "ServiceUnavailable", "Service unavailable")
	case ResetBefore:
		_, _ = io.Copy(io.Discard, r.Body)
		reset(w)
	case ResetAfter:
		rec := &discard{header: http.Header{}}
		p.rp.ServeHTTP(rec, r)
		reset(w)
	case Delay:
		select {
		case <-time.After(p.delay()):
		case <-r.Context().Done():
			return
		}
		p.rp.ServeHTTP(w, r)
	}
}

func (p *Proxy) forwarded(op string) {
	p.mu.Lock()
	f := p.opts.Forwarded
	p.mu.Unlock()
	if f != nil {
		f(op)
	}
}

func (p *Proxy) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opts.Delay
}

// reset closes the client's connection with a TCP RST, no answer sent.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// discard is a ResponseWriter that drops the answer.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// writeError answers an AWS error in the request's protocol: JSON
// (__type and message) when it came with X-Amz-Target, else the Query
// protocol's XML ErrorResponse.
func writeError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		ct := "application/x-amz-json-1.0"
		if !strings.HasPrefix(t, "DynamoDB_") && !strings.HasPrefix(t, "AmazonSQS") {
			ct = "application/x-amz-json-1.1"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": message})
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	typ := "Sender"
	if status >= 500 {
		typ = "Receiver"
	}
	_, _ = fmt.Fprintf(w, `<ErrorResponse><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>faultproxy</RequestId></ErrorResponse>`, typ, code, message)
}
