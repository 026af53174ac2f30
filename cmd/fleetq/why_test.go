package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serveJSON answers every request with body, and records the paths asked.
func serveJSON(t *testing.T, body string) (*httptest.Server, *[]string) {
	t.Helper()
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &paths
}

const queuedJob = `{"job_id":"acme:j1","tenant_id":"acme","workflow_id":"wf","fleet_slug":"gpu","status":"queued","attempts":0,"max_attempts":3,
"preemptions":0,"priority":0,"created_at":"2026-03-01T12:00:00.000Z","updated_at":"2026-03-01T12:00:00.000Z","lease_expires_at":null,
"worker_id":null,"result":null,"error":null,"history":[],"cost_usd":null,
"estimated_start_at":"2026-03-01T12:04:00.000Z","estimate_basis":"projection","position":3,
"waiting_on":{"code":"jobs_ahead","params":{"ahead":"2","ready_at":"2026-03-01T12:04:00Z"},"text":"2 jobs ahead; a slot frees at 12:04 UTC"}}`

func TestWhyJobPrintsTheEstimateAndWhatItWaitsOn(t *testing.T) {
	srv, paths := serveJSON(t, queuedJob)
	for _, args := range [][]string{{"why"}, {"jobs", "get"}} {
		var out, errOut bytes.Buffer
		args = append(args, "--api", srv.URL, "--api-key", "k", "acme:j1")
		if code := runCLI(t.Context(), args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		for _, want := range []string{"2026-03-01T12:04:00.000Z (projection)", "2 jobs ahead; a slot frees at 12:04 UTC [jobs_ahead]", "place in line"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: %q missing from\n%s", args[:2], want, out.String())
			}
		}
	}
	if (*paths)[0] != "/api/jobs/acme:j1" {
		t.Errorf("asked %v", *paths)
	}
}

func TestWhyJobSaysWhenItCannotSay(t *testing.T) {
	body := strings.Replace(queuedJob, `"estimated_start_at":"2026-03-01T12:04:00.000Z","estimate_basis":"projection"`, `"estimate_basis":"no_history"`, 1)
	srv, _ := serveJSON(t, body)
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"why", "--api", srv.URL, "--api-key", "k", "acme:j1"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "estimated start: cannot say (no_history)") || strings.Contains(out.String(), "expected to start") {
		t.Errorf("output:\n%s", out.String())
	}
}

const fleetsAtMax = `{"fleets":[{"fleet_slug":"gpu","stage":"prod","workflows":["wf"],"queued":9,"leased":4,"desired":4,"in_service":4,"workers":4,
"outdated_agents":0,"min":0,"max":4,"last_decision":{"at":"2026-03-01T12:00:00.000Z","desired":4,"reason":"hold 4: 9 ready + 4 leased need 13 × 1 slots (max 4); have 4 busy, 0 idle, 0 booting",
"reason_code":"hold","in_service":4,"inputs":{"ready":9,"leased":4,"need":13,"busy":4,"cap_held":2}}}]}`

func TestWhyFleetSaysTheLastDecisionAndWhatWouldChangeIt(t *testing.T) {
	srv, paths := serveJSON(t, fleetsAtMax)
	var out, errOut bytes.Buffer
	if code := runCLI(t.Context(), []string{"why", "--api", srv.URL, "--operator-token", "op", "--fleet", "gpu"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		"fleet gpu: desired 4 (min 0, max 4)",
		"last decision 2026-03-01T12:00:00.000Z (hold): desired 4",
		"hold 4: 9 ready + 4 leased need 13",
		"it is at its max 4 and its work needs 13: a higher max_instances lets it grow",
		"2 ready jobs are held by their tenants' max_leased caps",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("%q missing from\n%s", want, out.String())
		}
	}
	if (*paths)[0] != "/api/admin/fleets" {
		t.Errorf("asked %v", *paths)
	}
	errOut.Reset()
	if code := runCLI(t.Context(), []string{"why", "--api", srv.URL, "--operator-token", "op", "--fleet", "nope"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), `no fleet "nope"`) {
		t.Errorf("unknown fleet: exit %d, %s", code, errOut.String())
	}
	if code := runCLI(t.Context(), []string{"why", "--api", srv.URL, "--fleet", "gpu", "j1"}, &out, &errOut); code != 2 {
		t.Errorf("a fleet and a job: exit %d", code)
	}
}

func TestWhatWouldChangeAFleetAtRest(t *testing.T) {
	for _, c := range []struct {
		body, want string
	}{
		{strings.NewReplacer(`"max":4`, `"max":10`, `"desired":4,"in_service":4`, `"desired":4,"in_service":4`).Replace(fleetsAtMax), "its work needs 13: it grows at the next tick"},
		{`{"fleets":[{"fleet_slug":"gpu","stage":"s","workflows":[],"queued":0,"leased":0,"desired":0,"in_service":0,"workers":0,"outdated_agents":0,"min":0,"max":4,
"last_decision":{"at":null,"desired":0,"reason":"hold 0: no work","reason_code":"hold","in_service":0}}]}`, "it has no work and is at its min 0: a new job grows it"},
		{`{"fleets":[{"fleet_slug":"gpu","stage":"s","workflows":[],"queued":0,"leased":1,"desired":3,"in_service":3,"workers":3,"outdated_agents":0,"min":0,"max":4,
"last_decision":{"at":null,"desired":3,"reason":"hold 3: 0 ready + 1 leased need 1 × 2 slots","reason_code":"hold","in_service":3,"inputs":{"leased":1,"need":1,"busy":1,"idle":2}}}]}`,
			"its work needs 1 of its 3 instances: the idle ones beyond are terminated once idle past the scale-in grace"},
		{`{"fleets":[{"fleet_slug":"gpu","stage":"s","workflows":[],"queued":0,"leased":2,"desired":2,"in_service":2,"workers":2,"outdated_agents":0,"min":0,"max":4,
"last_decision":{"at":null,"desired":2,"reason":"hold 2","reason_code":"hold","in_service":2,"inputs":{"leased":2,"need":2,"busy":2}}}]}`,
			"its work needs all 2 instances"},
		{`{"fleets":[{"fleet_slug":"gpu","stage":"s","workflows":[],"queued":0,"leased":0,"desired":2,"in_service":2,"workers":2,"outdated_agents":0,"min":0,"max":4,
"last_decision":{"at":null,"desired":2,"reason":"hold 2: no work for 1m of the 15m idle window","reason_code":"hold","in_service":2,"inputs":{"idle":2}}}]}`,
			"it has no work: once its idle window passes it shrinks to its min 0"},
		{`{"fleets":[{"fleet_slug":"gpu","stage":"s","workflows":[],"queued":1,"leased":0,"desired":1,"in_service":0,"workers":0,"outdated_agents":0,"min":0,"max":4,
"last_decision":{"at":null,"desired":1,"reason":"woken by 1 ready job","reason_code":"wake","in_service":0,"inputs":{"ready":1}}}]}`, "the next tick (within a minute) sizes it to its work"},
		{`{"fleets":[{"fleet_slug":"gpu","stage":"s","workflows":[],"queued":0,"leased":0,"desired":0,"in_service":0,"workers":0,"outdated_agents":0,"min":0,"max":4,
"last_decision":null}]}`, "the scaler has not decided for it yet"},
	} {
		srv, _ := serveJSON(t, c.body)
		var out, errOut bytes.Buffer
		if code := runCLI(t.Context(), []string{"why", "--api", srv.URL, "--operator-token", "op", "--fleet", "gpu"}, &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%q missing from\n%s", c.want, out.String())
		}
	}
}

// What would change a fleet counts its instances and jobs in agreement:
// one instance, one job, two instances.
func TestWhatWouldChangeCountsAgree(t *testing.T) {
	for _, c := range []struct {
		desired int
		inputs  string
		want    []string
	}{
		{1, `"leased":1,"need":1,"busy":1,"delayed":1,"booting":1,"unhealthy":1,"cap_held":1`, []string{"1 in service, 1 worker;", "its work needs its 1 instance:",
			"1 ready job is held by its tenant's max_leased cap", "1 job waits out a retry backoff and counts once it passes",
			"1 instance is booting and takes work once registered", "1 instance never registered or stopped answering and is replaced"}},
		{2, `"leased":1,"need":1,"busy":1,"idle":1`, []string{"2 in service, 2 workers;", "its work needs 1 of its 2 instances:"}},
		{3, `"leased":1,"need":1,"busy":1,"idle":2,"booting":2`, []string{"its work needs 1 of its 3 instances:", "2 instances are booting and take work once registered"}},
		{2, `"leased":2,"need":2,"busy":2,"delayed":2`, []string{"its work needs all 2 instances:", "2 jobs wait out a retry backoff and count once it passes"}},
	} {
		body := fmt.Sprintf(`{"fleets":[{"fleet_slug":"gpu","stage":"s","workflows":[],"queued":0,"leased":1,"desired":%d,"in_service":%[1]d,"workers":%[1]d,"outdated_agents":0,"min":0,"max":4,
"last_decision":{"at":null,"desired":%[1]d,"reason":"hold","reason_code":"hold","in_service":%[1]d,"inputs":{%s}}}]}`, c.desired, c.inputs)
		srv, _ := serveJSON(t, body)
		var out, errOut bytes.Buffer
		if code := runCLI(t.Context(), []string{"why", "--api", srv.URL, "--operator-token", "op", "--fleet", "gpu"}, &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%q missing from\n%s", w, out.String())
			}
		}
	}
}
