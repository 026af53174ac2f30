package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// recordingAPI is a proxy in front of api that counts the GETs of job
// paths and signals each request to the wait route on waits; with
// noWaitRoute it answers that route 404, as an API from before it does.
type recordingAPI struct {
	URL   string
	waits chan struct{}
	mu    sync.Mutex
	gets  int // GET /api/jobs/{job_id}
	held  int // GET /api/jobs/{job_id}/wait
}

func newRecordingAPI(t *testing.T, api string, noWaitRoute bool) *recordingAPI {
	t.Helper()
	target, err := url.Parse(api)
	if err != nil {
		t.Fatal(err)
	}
	r := &recordingAPI{waits: make(chan struct{}, 100)}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/api/jobs/") {
			wait := strings.HasSuffix(req.URL.Path, "/wait")
			r.mu.Lock()
			if wait {
				r.held++
			} else {
				r.gets++
			}
			r.mu.Unlock()
			if wait {
				r.waits <- struct{}{}
				if noWaitRoute {
					wire.WriteJSON(w, http.StatusNotFound, wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeNotFound, Message: "no route GET " + req.URL.Path}})
					return
				}
			}
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *recordingAPI) counts() (gets, held int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets, r.held
}

// waitWhileTheJobRuns runs jobs wait through api on a job, and completes
// the job once the CLI has asked the wait route.
func waitWhileTheJobRuns(t *testing.T, stack *checkedStack, api *recordingAPI, jobID string) (int, string, string) {
	t.Helper()
	if code, _, errOut := cli(t, stack, "submit", "--tenant", "t1", "--workflow", "demo-sleep", "--job-id", strings.TrimPrefix(jobID, "t1:"), "--input", `{"seconds":1}`); code != 0 {
		t.Fatalf("submit: exit %d, %s", code, errOut)
	}
	token, leased := leaseNext(t, stack)
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := runCLI(t.Context(), []string{"jobs", "wait", "--api", api.URL, "--operator-token", stack.OperatorToken, "--interval", "10ms", "--timeout", "30s", jobID}, &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	select {
	case <-api.waits:
	case r := <-done:
		t.Fatalf("jobs wait ended without asking the wait route: exit %d\n%s%s", r.code, r.out, r.err)
	}
	var st wire.StatusResponse
	post(t, stack.URL+wire.PathComplete, map[string]string{"Authorization": "Bearer " + token},
		wire.CompleteRequest{LeaseRef: wire.LeaseRef{JobID: leased.JobID, LeaseToken: leased.LeaseToken}, Result: json.RawMessage(`{"frames":1}`)}, http.StatusOK, &st)
	r := <-done
	return r.code, r.out, r.err
}

func TestJobsWaitHoldsTheWaitRouteInsteadOfPolling(t *testing.T) {
	t.Parallel()
	stack := startStack(t)
	api := newRecordingAPI(t, stack.URL, false)
	code, out, errOut := waitWhileTheJobRuns(t, stack, api, "t1:held-1")
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("wait: exit %d\n%s%s", code, out, errOut)
	}
	// One read to learn the status, then held requests: no look every
	// 10ms while the job ran.
	if gets, held := api.counts(); gets != 1 || held < 1 {
		t.Fatalf("%d GETs of the job and %d waits, want 1 GET and the waits", gets, held)
	}
}

func TestJobsWaitPollsAnAPIWithoutTheWaitRoute(t *testing.T) {
	t.Parallel()
	stack := startStack(t)
	api := newRecordingAPI(t, stack.URL, true)
	code, out, errOut := waitWhileTheJobRuns(t, stack, api, "t1:polled-1")
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("wait: exit %d\n%s%s", code, out, errOut)
	}
	if _, held := api.counts(); held != 1 {
		t.Fatalf("asked the missing wait route %d times, want once", held)
	}
}
