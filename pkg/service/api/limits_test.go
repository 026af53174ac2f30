package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/aws/sqsqueue"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/service/system/apifn"
)

// maxRequestAlloc is what the API may allocate to refuse one request, over
// the body itself, however the body nests: reading a 256 KiB body costs
// about 512 KiB (the buffer doubles as it fills), and decoding stops at
// the 33rd level. Before the depth bound and the linear key walk, a 30 KB
// body of nested arrays allocated over a gigabyte here.
const maxRequestAlloc = 2 << 20

// countingBody is a request body that counts the bytes read from it.
type countingBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return nil }

// directAPI is the API handler as the stack builds it (the same
// constructor), called without a network in between so that what a request
// allocates and reads can be measured around it.
func directAPI(h *harness) http.Handler {
	keys, err := signing.NewStatic(h.stack.ConsoleKey)
	if err != nil {
		panic(err)
	}
	a, err := apifn.NewAPI(h.stack.Env, sqsqueue.Queue{Client: h.stack.SQS, URL: h.stack.QueueURL},
		keys, auth.OperatorToken(operatorToken), h.stack.Assets)
	if err != nil {
		panic(err)
	}
	return a
}

type measured struct {
	status    int
	code, msg string
	read      int64
	allocated uint64
}

// serve sends one request to handler and measures the bytes the process
// allocated meanwhile and the bytes of the body the handler read.
func serve(t *testing.T, handler http.Handler, path, header, value string, body []byte, declared int64) measured {
	t.Helper()
	cb := &countingBody{r: strings.NewReader(string(body))}
	req := httptest.NewRequest("POST", path, nil)
	req.Body, req.ContentLength = cb, declared
	req.Header.Set("Content-Type", "application/json")
	if header != "" {
		req.Header.Set(header, value)
	}
	rec := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	handler.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	m := measured{status: rec.Code, read: cb.read.Load(), allocated: after.TotalAlloc - before.TotalAlloc}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil && rec.Code >= 400 {
		t.Fatalf("POST %s answered %d with %q, not the error body", path, rec.Code, rec.Body.String())
	}
	m.code, m.msg = e.Error.Code, e.Error.Message
	return m
}

func deepArrays(field string, size int) []byte {
	n := (size - len(field) - 6) / 2
	return []byte(`{"` + field + `":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
}

func deepObjects(field string, size int) []byte {
	n := (size - len(field) - 6) / 7
	return []byte(`{"` + field + `":` + strings.Repeat(`{"a":`, n) + "{}" + strings.Repeat("}", n) + `}`)
}

// TestDeepBodiesAreRefusedAtConstantCost sends the bodies that used to
// exhaust the API — 30 KB and 240 KB of nested arrays and objects — to a
// worker route with a made-up token for a known fleet, with a real token,
// and to the submit route with the operator credential. The made-up token
// is refused before a byte of the body is read; the others are refused
// with 400 naming the nesting limit. Each refusal allocates less than
// maxRequestAlloc, measured around the request.
func TestDeepBodiesAreRefusedAtConstantCost(t *testing.T) {
	h := newHarness(t)
	api := directAPI(h)
	real := h.register("w-deep", "gpu")
	madeUp, _ := auth.NewWorkerToken("gpu", "w-deep")
	unknown, _ := auth.NewWorkerToken("gpu", "w-nobody")
	bodies := map[string][]byte{}
	for _, size := range []int{30 << 10, 240 << 10} {
		for _, field := range []string{"result", "input"} {
			bodies[field+"/arrays/"+byteSize(size)] = deepArrays(field, size)
			bodies[field+"/objects/"+byteSize(size)] = deepObjects(field, size)
		}
	}
	for name, body := range bodies {
		field, _, _ := strings.Cut(name, "/")
		if field == "result" {
			for _, token := range []string{madeUp, unknown} {
				m := serve(t, api, "/api/worker/complete", "Authorization", "Bearer "+token, body, int64(len(body)))
				if m.status != 401 || m.code != "unauthenticated" || m.read != 0 {
					t.Errorf("%s with a made-up token: %d %s, %d bytes of the body read; want 401 before reading", name, m.status, m.code, m.read)
				}
				checkAlloc(t, name+" with a made-up token", m, len(body))
			}
			m := serve(t, api, "/api/worker/complete", "Authorization", "Bearer "+real, body, int64(len(body)))
			wantDepthRefusal(t, name+" from the worker", m, field)
			continue
		}
		m := serve(t, api, "/api/jobs", "Authorization", "Bearer "+operatorToken, body, int64(len(body)))
		wantDepthRefusal(t, name+" submitted", m, field)
	}
	if !h.submissionQueueEmpty() {
		t.Fatal("a refused submission was queued")
	}
	// Over the network too, the refusal has the protocol's error shape.
	r := h.do("POST", "/api/worker/complete", real, string(bodies["result/arrays/30KiB"]))
	h.want(r, 400, "invalid_argument")
}

func wantDepthRefusal(t *testing.T, what string, m measured, field string) {
	t.Helper()
	if m.status != 400 || m.code != "invalid_argument" || !strings.Contains(m.msg, `field "`+field+`"`) || !strings.Contains(m.msg, "32 levels") {
		t.Errorf("%s: %d %s %q; want 400 invalid_argument naming the field and the limit", what, m.status, m.code, m.msg)
	}
	checkAlloc(t, what, m, 0)
}

func checkAlloc(t *testing.T, what string, m measured, _ int) {
	t.Helper()
	if m.allocated > maxRequestAlloc {
		t.Errorf("%s: the request allocated %d bytes, more than %d", what, m.allocated, maxRequestAlloc)
	}
	if testing.Verbose() {
		t.Logf("%s: %d %s, %d bytes allocated, %d bytes read", what, m.status, m.code, m.allocated, m.read)
	}
}

// TestUnauthenticatedBodiesAreNotRead: a request without its route's
// credential is refused before its body is read, on worker, registration
// and producer routes alike; a body declared larger than 256 KiB is
// refused with 413 before it is read, and one sent without a length is cut
// off at the limit.
func TestUnauthenticatedBodiesAreNotRead(t *testing.T) {
	h := newHarness(t)
	api := directAPI(h)
	big := deepArrays("result", 200<<10)
	otherFleet, _ := auth.NewWorkerToken("no-such-fleet", "w1")
	for _, c := range []struct {
		name, path, header, value string
	}{
		{"no token", "/api/worker/heartbeat", "", ""},
		{"a malformed token", "/api/worker/heartbeat", "Authorization", "Bearer fqw1.x.y.z"},
		{"a token of an unknown fleet", "/api/worker/poll", "Authorization", "Bearer " + otherFleet},
		{"no fleet secret", "/api/worker/register", "", ""},
		{"a wrong fleet secret", "/api/worker/register", "X-Fleet-Secret", "guess"},
		{"no operator credential", "/api/jobs", "", ""},
		{"a wrong operator token", "/api/jobs", "Authorization", "Bearer guess"},
	} {
		m := serve(t, api, c.path, c.header, c.value, big, int64(len(big)))
		if m.status != 401 || m.code != "unauthenticated" || m.read != 0 {
			t.Errorf("%s on %s: %d %s, %d bytes of the body read; want 401 before reading", c.name, c.path, m.status, m.code, m.read)
		}
		checkAlloc(t, c.name, m, len(big))
	}
	m := serve(t, api, "/api/jobs", "Authorization", "Bearer "+operatorToken, big, 1<<20)
	if m.status != 413 || m.code != "invalid_argument" || m.read != 0 || !strings.Contains(m.msg, "256 KiB") {
		t.Errorf("a body declared as 1 MiB: %d %s %q, %d bytes read; want 413 before reading", m.status, m.code, m.msg, m.read)
	}
	over := append(deepArrays("input", 300<<10), ' ')
	m = serve(t, api, "/api/jobs", "Authorization", "Bearer "+operatorToken, over, -1)
	if m.status != 413 || m.code != "invalid_argument" || m.read > 256<<10+1 {
		t.Errorf("a 300 KiB body without a length: %d %s, %d bytes read; want 413 at the limit", m.status, m.code, m.read)
	}
	checkAlloc(t, "a body without a length", m, 0)
}

func byteSize(n int) string { return fmt.Sprintf("%dKiB", n>>10) }

// TestARefusedTokenIsCheckedAgainBeforeReading: the API remembers a token
// it has checked, so a worker's next request skips the read; once the
// store refuses that token (here: the worker was revoked), the token is
// forgotten and the next request is refused before its body is read.
func TestARefusedTokenIsCheckedAgainBeforeReading(t *testing.T) {
	h := newHarness(t)
	api := directAPI(h)
	token := h.register("w-rev", "gpu")
	body := []byte(`{"current_load":0}`)
	if m := serve(t, api, "/api/worker/poll", "Authorization", "Bearer "+token, body, int64(len(body))); m.status != 204 {
		t.Fatalf("poll: %d %s", m.status, m.msg)
	}
	h.want(h.do("POST", "/api/admin/workers/w-rev/revoke", "op", nil), 200, "")
	// Still remembered: the body is read, the store refuses.
	m := serve(t, api, "/api/worker/poll", "Authorization", "Bearer "+token, body, int64(len(body)))
	if m.status != 403 || m.read == 0 {
		t.Fatalf("first poll after the revocation: %d %s, %d bytes read; want 403 from the store", m.status, m.code, m.read)
	}
	m = serve(t, api, "/api/worker/poll", "Authorization", "Bearer "+token, body, int64(len(body)))
	if m.status != 403 || m.code != "permission_denied" || m.read != 0 {
		t.Fatalf("second poll after the revocation: %d %s, %d bytes read; want 403 before reading", m.status, m.code, m.read)
	}
}
