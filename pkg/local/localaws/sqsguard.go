package localaws

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// sqsGuard stands in front of the embedded SQS-API server (goaws), whose
// actions look their queue up in its process-wide map of queues without
// its lock, while CreateQueue and DeleteQueue write that map under it: a
// queue created by one test while another test's stack sends or receives
// would be a concurrent map read and write, which ends the process. The
// guard lets the actions that write the map run alone and the others
// together.
//
// A receive that waits for messages (WaitTimeSeconds) would hold the
// others' share for up to 20 s and keep every queue from being created
// meanwhile, so the guard waits itself: it asks goaws without waiting,
// under the shared lock, every 100 ms (as goaws's own wait does) until a
// message comes or the wait is over.
type sqsGuard struct {
	mu   sync.RWMutex
	next http.Handler
}

const (
	sqsTargetPrefix = "AmazonSQS."
	sqsJSON         = "application/x-amz-json-1.0"
	// sqsWaitStep is how often a waiting receive looks again.
	sqsWaitStep = 100 * time.Millisecond
)

func (g *sqsGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	action := sqsAction(r)
	switch action {
	case "CreateQueue", "DeleteQueue":
		g.mu.Lock()
		defer g.mu.Unlock()
		g.next.ServeHTTP(w, r)
		return
	case "ReceiveMessage":
		if body, wait, ok := waitingReceive(r); ok {
			g.receive(w, r, body, wait)
			return
		}
	}
	g.serveShared(w, r)
}

func (g *sqsGuard) serveShared(w http.ResponseWriter, r *http.Request) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	g.next.ServeHTTP(w, r)
}

// sqsAction names the request's action: from X-Amz-Target in the JSON
// protocol (what the SDK speaks), from the form in the query protocol.
func sqsAction(r *http.Request) string {
	if r.Header.Get("Content-Type") == sqsJSON {
		return strings.TrimPrefix(r.Header.Get("X-Amz-Target"), sqsTargetPrefix)
	}
	return r.FormValue("Action")
}

// waitingReceive answers a JSON ReceiveMessage's body with its wait set to
// zero, and the wait it asked for; ok is false for a receive that does not
// wait (or one the guard cannot read, which goaws answers itself).
func waitingReceive(r *http.Request) (body []byte, wait time.Duration, ok bool) {
	if r.Header.Get("Content-Type") != sqsJSON {
		return nil, 0, false
	}
	raw, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(raw))
	if err != nil {
		return nil, 0, false
	}
	var in map[string]any
	if json.Unmarshal(raw, &in) != nil {
		return nil, 0, false
	}
	secs, _ := in["WaitTimeSeconds"].(float64)
	if secs <= 0 {
		return nil, 0, false
	}
	in["WaitTimeSeconds"] = 0
	if body, err = json.Marshal(in); err != nil {
		return nil, 0, false
	}
	return body, time.Duration(secs * float64(time.Second)), true
}

// receive answers a receive that waits up to wait: the first answer with
// messages, an error, or the last empty one.
func (g *sqsGuard) receive(w http.ResponseWriter, r *http.Request, body []byte, wait time.Duration) {
	ctx := r.Context()
	deadline := time.Now().Add(wait)
	for {
		rec := httptest.NewRecorder()
		req := r.Clone(ctx)
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		g.serveShared(rec, req)
		left := time.Until(deadline)
		if rec.Code != http.StatusOK || hasMessages(rec.Body.Bytes()) || left <= 0 || !pause(ctx, min(sqsWaitStep, left)) {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
	}
}

// pause waits d; false when ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func hasMessages(answer []byte) bool {
	var out struct {
		Messages []json.RawMessage `json:"Messages"`
	}
	return json.Unmarshal(answer, &out) == nil && len(out.Messages) > 0
}
