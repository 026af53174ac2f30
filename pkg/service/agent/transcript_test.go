package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// An agent of release N works against the API of release N-1 during a
// deploy (docs/deploy.md, "Compatibility"). The previous release's API is
// its recorded answers: pkg/service/api's TestPreviousAgentTranscriptReplays
// records the agent's protocol at each release (see there how). Here
// today's worker client makes each recorded call against a server that
// answers what that release answered, and must
//   - send only the fields that release's agent sent (its API refuses
//     unknown fields), to the same route, with the token it was given;
//   - read every answer: the token, the lease, the cancel flag, and the
//     error codes it acts on.

const transcriptDir = "../../domain/wire/testdata"

func TestAgentSpeaksThePreviousRelease(t *testing.T) {
	t.Parallel()
	testenv.EachReleaseTranscript(t, transcriptDir, speak)
}

// sent is a request the client made.
type sent struct {
	method, path, auth string
	body               []byte
}

// unknownFields lists the fields of got that want does not have: a strict
// decoder of want's release refuses them.
func unknownFields(path string, got, want any) []string {
	g, ok := got.(map[string]any)
	if !ok {
		return nil
	}
	w, _ := want.(map[string]any)
	var out []string
	for k, v := range g {
		wv, known := w[k]
		if !known {
			out = append(out, path+"."+k)
			continue
		}
		out = append(out, unknownFields(path+"."+k, v, wv)...)
	}
	sort.Strings(out)
	return out
}

func speak(t *testing.T, file string, tr testenv.Transcript) {
	var (
		mu   sync.Mutex
		next testenv.Exchange
		got  sent
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = sent{method: r.Method, path: r.URL.Path, body: body, auth: r.Header.Get("Authorization")}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(next.Status)
		_, _ = w.Write(next.Response)
	}))
	t.Cleanup(srv.Close)

	ctx := context.Background()
	clients := map[string]*agent.Client{}
	tokens := map[string]string{}
	calls := 0
	for i, ex := range tr.Exchanges {
		if ex.Call == "" {
			continue // the operator's setup
		}
		calls++
		what := fmt.Sprintf("exchange %d (%s)", i, ex.Step)
		c, ok := clients[ex.Worker]
		if !ok {
			c = &agent.Client{API: srv.URL, HTTP: srv.Client()}
			clients[ex.Worker] = c
		}
		var req map[string]any
		if len(ex.Request) > 0 {
			if err := json.Unmarshal(ex.Request, &req); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		str := func(k string) string { s, _ := req[k].(string); return s }
		mu.Lock()
		next = ex
		mu.Unlock()

		var callErr error
		check := func() {} // what the client must have read from the answer
		switch ex.Call {
		case "register":
			var r wire.RegisterRequest
			if err := json.Unmarshal(ex.Request, &r); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			var out wire.RegisterResponse
			out, callErr = c.Register(ctx, map[string]string{wire.HeaderFleetSecret: "the fleet's secret"}, r)
			check = func() {
				var rec wire.RegisterResponse
				_ = json.Unmarshal(ex.Response, &rec)
				if out.Token == "" || out.Token != rec.Token || out.HeartbeatSeconds != rec.HeartbeatSeconds || len(out.WorkflowsAssigned) != len(rec.WorkflowsAssigned) {
					t.Errorf("%s: the client read %+v from the release's answer %s", what, out, ex.Response)
				}
				tokens[ex.Worker] = rec.Token
			}
		case "poll":
			load := 0
			if f, ok := req["current_load"].(float64); ok {
				load = int(f)
			}
			var l *agent.Lease
			l, callErr = c.Poll(ctx, load)
			check = func() {
				var rec struct {
					Job *wire.LeasedJob `json:"job"`
				}
				_ = json.Unmarshal(ex.Response, &rec)
				switch {
				case rec.Job == nil && l != nil:
					t.Errorf("%s: no job was answered, the client read %+v", what, l)
				case rec.Job != nil && (l == nil || l.JobID != rec.Job.JobID || l.LeaseToken != rec.Job.LeaseToken || string(l.Input) != string(rec.Job.Input)):
					t.Errorf("%s: the client read %+v from the release's answer %s", what, l, ex.Response)
				}
			}
		case "heartbeat":
			var progress *float64
			if p, ok := req["progress"].(float64); ok {
				progress = &p
			}
			refresh, _ := req["refresh_urls"].(bool)
			var hb wire.HeartbeatResponse
			hb, callErr = c.Heartbeat(ctx, str("job_id"), str("lease_token"), progress, refresh)
			check = func() {
				var rec wire.HeartbeatResponse
				_ = json.Unmarshal(ex.Response, &rec)
				if hb.Cancel != rec.Cancel || (rec.LeaseExpiresAt != nil) != (hb.LeaseExpiresAt != nil) {
					t.Errorf("%s: the client read %+v from the release's answer %s", what, hb, ex.Response)
				}
				if u := rec.LeaseURLs; u != nil && (hb.LeaseURLs == nil || hb.OutputURL != u.OutputURL || hb.LogURL != u.LogURL || len(hb.InputURLs) != len(u.InputURLs)) {
					t.Errorf("%s: the client read URLs %+v from the release's answer %s", what, hb.LeaseURLs, ex.Response)
				}
			}
		case "complete":
			result, _ := json.Marshal(req["result"])
			callErr = c.Complete(ctx, str("job_id"), str("lease_token"), result)
		case "fail":
			e, _ := req["error"].(map[string]any)
			msg, _ := e["message"].(string)
			code, _ := e["code"].(string)
			retry, _ := e["retryable"].(bool)
			callErr = c.Fail(ctx, str("job_id"), str("lease_token"), &agent.JobError{Message: msg, Code: code, Retryable: retry})
		case "requeue":
			callErr = c.Requeue(ctx, str("job_id"), str("lease_token"), job.PreemptReason(str("reason")))
		case "unhealthy":
			callErr = c.Unhealthy(ctx, str("reason"))
		case "deregister":
			callErr = c.Deregister(ctx)
		default:
			t.Fatalf("%s: the transcript names a call %q the agent no longer makes", what, ex.Call)
		}

		mu.Lock()
		s := got
		mu.Unlock()
		if s.method != ex.Method || s.path != ex.Path {
			t.Errorf("%s: today's agent calls %s %s, the release's API serves %s %s", what, s.method, s.path, ex.Method, ex.Path)
		}
		var body any
		if err := json.Unmarshal(s.body, &body); err != nil {
			t.Errorf("%s: the request body is not JSON: %q", what, s.body)
		}
		if extra := unknownFields("body", body, any(req)); len(extra) > 0 {
			t.Errorf("%s: today's agent sends %s, which the release's API refuses as unknown (send a new field only from the release after the API accepts it)", what, strings.Join(extra, ", "))
		}
		if ex.Auth == "worker" && s.auth != "Bearer "+tokens[ex.Worker] {
			t.Errorf("%s: sent %q, not the token the release's registration answered", what, s.auth)
		}

		if ex.Status >= 300 {
			var rec struct {
				Error struct {
					Code wire.Code `json:"code"`
				} `json:"error"`
			}
			_ = json.Unmarshal(ex.Response, &rec)
			var we *wire.Error
			if !errors.As(callErr, &we) || we.Status != ex.Status || we.Code != rec.Error.Code {
				t.Errorf("%s: the release answered %d %s; the client returned %v", what, ex.Status, rec.Error.Code, callErr)
			}
			continue
		}
		if callErr != nil {
			t.Errorf("%s: the release answered %d %s; the client failed: %v", what, ex.Status, ex.Response, callErr)
			continue
		}
		check()
	}
	if calls == 0 {
		t.Fatalf("%s records no call of the agent", file)
	}
}
