package upgrade_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/aws/preflight"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/logging"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/jobevents"
)

// upgrade is one run of the deploy: the previous release's stage (its real
// `fleetq dev`, agents and jobs), the switch to today's dev stack on the same
// table, queue and bucket, and the rollback to the previous release.
type upgrade struct {
	oldBin   string
	newBin   string
	secret   string // the previous release's stage-wide fleet secret
	operator string
	gates    string // a job's command waits for a file named by its id here
	states   string
	front    *front
	receiver *receiver
	// The stage's DynamoDB, SQS and S3, and each release's view of them.
	ddb, sqs, s3 *localaws.Server
	old, today   releaseAWS
	oldStack     *process
	stack        *devstack.Stack
	// oldEvents are the job events the previous release published.
	oldEvents []jobevents.Event
}

// The previous release, built from the repository's history, upgraded in
// place to today's: its dev stack and agents run jobs on the stage; today's
// dev stack takes over the same table, queue and bucket while the old agents
// keep running; then the stage rolls back to the previous release. Each
// subtest is one promise of docs/deploy.md, "Compatibility".
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and runs it")
	}
	rel := previousRelease(t)
	u := &upgrade{secret: auth.RandomSecret(24), operator: auth.RandomSecret(24), gates: t.TempDir(), states: t.TempDir()}
	began := time.Now()
	u.oldBin = buildRelease(t, rel)
	t.Logf("release %s (%s) built in %s", rel.Version, rel.Commit, time.Since(began).Round(time.Second))
	began = time.Now()
	u.newBin = testenv.BuildBinary(t, filepath.Join(repoRoot, "cmd", "fleetq"), "fleetq")
	t.Logf("today's fleetq built in %s", time.Since(began).Round(time.Second))
	u.startServers(t)
	u.front = newFront(t)
	u.receiver = newReceiver(t, previousWebhookKey(u.secret))
	hook := u.receiver.srv.URL + "/hook"

	// The previous release's stage.
	u.startOldStack(t)
	u.oldAgent(t, "old-demo-1", "demo")
	oldGPU := u.oldAgent(t, "old-gpu-1", "gpu")
	u.open(t, "early")
	u.oldSubmit(t, "early", "acme", "render", hook)
	u.waitOld(t, "early", "succeeded")
	u.oldSubmit(t, "held", "acme", "render", hook)
	u.waitOld(t, "held", "leased")

	t.Run("today's agent registers with the previous API", func(t *testing.T) {
		// Failed when this test was written, until the agent sends only what the
		// previous API accepts.
		a := start(t, "today's agent new-demo-1", u.newBin, nil, u.agentArgs(t, "new-demo-1", "demo")...)
		testenv.Eventually(t, "new-demo-1 registered with the previous API", testenv.Ticks(t, 50*time.Millisecond), func() bool {
			if done, err := a.exited(); done {
				t.Fatalf("today's agent exited (%v) against the previous API:\n%s", err, tail([]byte(a.output()), 3000))
			}
			return u.oldWorkerListed(t, "new-demo-1")
		})
		u.open(t, "new-on-old")
		u.oldSubmit(t, "new-on-old", "acme", "render", "")
		u.waitOld(t, "new-on-old", "succeeded")
		a.stop(t)
	})

	// A job completed while the previous release's outbox cannot be read:
	// its outcome event is left there for today's relay.
	u.old.ddb.outboxDown.Store(true)
	u.open(t, "outboxed")
	u.oldSubmit(t, "outboxed", "acme", "train", "")
	u.waitOld(t, "outboxed", "succeeded")
	// A job the previous release accepted and queued (its one demo worker
	// is busy), then submissions its API accepted and its dispatch never
	// took.
	u.open(t, "pending")
	u.oldSubmit(t, "pending", "acme", "render", "")
	u.waitOld(t, "pending", "queued")
	u.old.sqs.holdReceives()
	u.open(t, "undispatched")
	u.oldSubmit(t, "undispatched", "acme", "render", "")
	u.open(t, "capped-1")
	u.oldSubmit(t, "capped-1", "capped", "render", "")
	u.oldEvents = u.recentOldEvents(t)

	// The deploy: today's stack on the same table, queue and bucket; the
	// stage's API URL moves to it; the previous stack stops.
	u.startToday(t, u.todayConfig(t))
	u.front.deploy(t, "today", u.stack.URL)
	u.oldStack.stop(t)

	t.Run("the previous agent heartbeats through the deploy and completes on today's API", func(t *testing.T) {
		testenv.Eventually(t, "a heartbeat of held on today's API", u.front.changed, func() bool {
			return u.front.count("today", "/api/worker/heartbeat") >= 2
		})
		u.open(t, "held")
		j := u.waitTodayJob(t, "held", job.Succeeded)
		if j.WorkerID != "old-demo-1" {
			t.Errorf("held completed by %q, want old-demo-1", j.WorkerID)
		}
	})

	t.Run("today's store reads every job and worker of the previous release", func(t *testing.T) {
		// Under the ids the previous release filed them (pending is
		// queued or already run by the old agent).
		for _, id := range []string{"early", "held", "outboxed", "pending"} {
			j, err := u.stack.Store.GetJob(context.Background(), id)
			if err != nil {
				t.Errorf("job %s: %v", id, err)
				continue
			}
			if j.TenantID != "acme" || (id != "pending" && j.Status != job.Succeeded) {
				t.Errorf("job %s: tenant %q, status %s; want acme, succeeded", id, j.TenantID, j.Status)
			}
		}
		for id, fleet := range map[string]string{"old-demo-1": "demo", "old-gpu-1": "gpu"} {
			w, err := u.stack.Store.GetWorker(context.Background(), id)
			if err != nil || w.Fleet != fleet {
				t.Errorf("worker %s: %+v, %v; want one of fleet %s", id, w, err, fleet)
			}
		}
	})

	key := u.apiKey(t, "acme")
	t.Run("a tenant reads its jobs of the previous release", func(t *testing.T) {
		// Failed when this test was written, until a producer's credential finds the
		// jobs the previous release filed under their bare ids.
		for _, id := range []string{"early", "held", "outboxed"} {
			status, body := u.call(t, http.MethodGet, "/api/jobs/"+id, key, nil)
			if status != http.StatusOK {
				t.Errorf("GET /api/jobs/%s as acme: %d %s", id, status, body)
			}
		}
		status, body := u.call(t, http.MethodGet, "/api/admin/jobs?fleet=demo&status=succeeded", u.operator, nil)
		var list struct {
			Jobs []struct {
				JobID    string `json:"job_id"`
				TenantID string `json:"tenant_id"`
			} `json:"jobs"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &list) != nil {
			t.Fatalf("the operator's list: %d %s", status, body)
		}
		listed := false
		for _, j := range list.Jobs {
			if j.TenantID != "acme" || !strings.HasSuffix(j.JobID, "early") {
				continue
			}
			listed = true
			if status, body := u.call(t, http.MethodGet, "/api/jobs/"+j.JobID, key, nil); status != http.StatusOK {
				t.Errorf("the list names early %q; GET /api/jobs/%s as acme: %d %s", j.JobID, j.JobID, status, body)
			}
		}
		if !listed {
			t.Errorf("the operator's list of demo's succeeded jobs has no early: %s", body)
		}
	})

	t.Run("a resubmission after the deploy is the job the previous release accepted", func(t *testing.T) {
		// Failed when this test was written, until today's API finds the job the
		// previous release queued under its bare id. (undispatched, accepted by the
		// previous API and dispatched by today's, holds already.)
		for _, id := range []string{"pending", "undispatched"} {
			status, body := u.call(t, http.MethodPost, "/api/jobs", key, submission(id, "acme", "render", ""))
			if status != http.StatusOK && status != http.StatusAccepted {
				t.Fatalf("resubmit %s: %d %s", id, status, body)
			}
		}
		u.waitQueueDrained(t)
		for _, id := range []string{"pending", "undispatched"} {
			var jobs []string
			for _, k := range []string{id, tenant.JobID("acme", id)} {
				if _, err := u.stack.Store.GetJob(context.Background(), k); err == nil {
					jobs = append(jobs, k)
				}
			}
			if len(jobs) != 1 {
				t.Errorf("jobs of the submission %s: %q; want exactly one", id, jobs)
			}
		}
	})

	t.Run("a capped tenant's submission accepted by the previous API is counted once", func(t *testing.T) {
		// Failed when this test was written, until the slot the previous API
		// reserved under the bare id is the one today's dispatch hands to the job.
		u.waitTodayJob(t, "capped-1", job.Succeeded)
		testenv.Eventually(t, "capped's open jobs back to 0", testenv.Ticks(t, 100*time.Millisecond), func() bool {
			n, err := u.stack.Store.TenantOpenJobs(context.Background(), "capped")
			return err == nil && n == 0
		})
		u.open(t, "capped-2")
		if status, body := u.call(t, http.MethodPost, "/api/jobs", u.operator, submission("capped-2", "capped", "render", "")); status != http.StatusAccepted && status != http.StatusOK {
			t.Errorf("capped's next submission after its only job finished: %d %s", status, body)
		}
	})

	t.Run("the previous release's outbox is relayed once", func(t *testing.T) {
		testenv.Eventually(t, "outboxed's outcome published by today's relay", testenv.Ticks(t, 100*time.Millisecond), func() bool {
			return len(eventsOf(u.stack.Events.Recent(0), "outboxed")) > 0
		})
		byOld := map[string]bool{}
		for _, e := range u.oldEvents {
			byOld[e.Detail.EventID] = true
		}
		if len(eventsOf(u.oldEvents, "early")) == 0 {
			t.Errorf("the previous release published no event of early: %+v", u.oldEvents)
		}
		if n := len(eventsOf(u.oldEvents, "outboxed")); n != 0 {
			t.Errorf("the previous release published %d events of outboxed while its outbox could not be read", n)
		}
		// Within a release the relay delivers at least once, under one id;
		// across the deploy an event is the one release's or the other's.
		for _, e := range u.stack.Events.Recent(0) {
			if byOld[e.Detail.EventID] {
				t.Errorf("event %s (%s of %s) published by the previous release and again by today's", e.Detail.EventID, e.DetailType, e.Detail.JobID)
			}
		}
	})

	t.Run("webhook receivers of the previous release verify today's callbacks", func(t *testing.T) {
		// Failed when this test was written, until today's callbacks verify
		// with the key receivers derived from the previous release's fleet
		// secret, given to today's stack as its webhook key's previous one.
		testenv.Eventually(t, "the callbacks of early and held", u.receiver.changed, func() bool {
			return len(u.receiver.of("early")) > 0 && len(u.receiver.of("held")) > 0
		})
		for _, d := range u.receiver.of("early") {
			if !d.verified {
				t.Fatalf("the previous release's own callback does not verify with the receiver's key: the receiver is wrong")
			}
		}
		for _, d := range u.receiver.of("held") {
			if !d.verified {
				t.Errorf("today's callback of held (event %s) does not verify with the previous release's key", d.eventID)
			}
		}
	})

	t.Run("previous agents in a fleet that now registers by attestation are named, then drained", func(t *testing.T) {
		// Today's API does not take the stage-wide secret, which the deploy
		// removes: a previous agent of a fleet that accepts no secret works
		// on with its worker token, and the upgrade procedure replaces it
		// (docs/deploy.md, "Removed: the stage-wide fleet secret"). Failed
		// when this test was written: doctor had no such check. Doctor,
		// reading today's API as an operator, names the agent; the drain it
		// asks for takes it out of leasing while it finishes what it holds.
		rs := preflight.StageSecretAgents(context.Background(), apiWorkers{u}, u.front.srv.URL, u.todayConfig(t))
		var gpu *preflight.Result
		for i := range rs {
			if rs[i].Check == "stage-secret agents gpu" {
				gpu = &rs[i]
			}
			if rs[i].Status == preflight.Warn && rs[i].Check != "stage-secret agents gpu" {
				t.Errorf("doctor warns of a fleet that accepts a secret of its own: %+v", rs[i])
			}
		}
		if gpu == nil || gpu.Status != preflight.Warn || !strings.Contains(gpu.Message, "old-gpu-1") {
			t.Fatalf("doctor's verdict on fleet gpu = %+v in %+v, want a warning naming old-gpu-1", gpu, rs)
		}
		if status, body := u.call(t, http.MethodPost, "/api/admin/workers/old-gpu-1/drain", u.operator, nil); status != http.StatusOK {
			t.Fatalf("drain old-gpu-1 = %d %s", status, body)
		}
		w, err := u.stack.Store.GetWorker(context.Background(), "old-gpu-1")
		if err != nil || w.Status != worker.Draining {
			t.Fatalf("old-gpu-1 after the drain: %+v, %v; want draining", w, err)
		}
		// It is still a live agent: its next heartbeat or poll is answered.
		if done, err := oldGPU.exited(); done {
			t.Fatalf("the drained previous agent exited (%v):\n%s", err, tail([]byte(oldGPU.output()), 3000))
		}
	})

	t.Run("rollback: the previous release carries on what today's wrote", func(t *testing.T) {
		// The fleet wide runs on four ready shards, then at zero (no job,
		// no worker) is lowered to one before the rollback, as
		// docs/data-model.md says a rollback needs.
		wide := start(t, "today's agent new-wide-1", u.newBin, nil, u.agentArgs(t, "new-wide-1", "wide")...)
		var wideJobs []string
		for i := range 4 {
			id := fmt.Sprintf("wide-%d", i)
			u.open(t, id)
			u.todaySubmit(t, id, "batch")
		}
		for i := range 4 {
			wideJobs = append(wideJobs, u.waitTodayJob(t, fmt.Sprintf("wide-%d", i), job.Succeeded).ID)
		}
		wide.stop(t)
		testenv.Eventually(t, "new-wide-1 deregistered", testenv.Ticks(t, 50*time.Millisecond), func() bool {
			ws, err := u.stack.Store.ListWorkers(context.Background(), "wide")
			return err == nil && len(ws) == 0
		})
		u.stopToday(t)
		cfg := u.todayConfig(t)
		for i := range cfg.Fleets {
			cfg.Fleets[i].ReadyShards = 1
		}
		u.startToday(t, cfg)
		u.front.deploy(t, "today", u.stack.URL)

		// A job today's release leases to the old agent and one it leaves
		// queued; then the stage goes back to the previous release.
		u.todaySubmit(t, "rollback-held", "render")
		held := u.waitTodayJob(t, "rollback-held", job.Leased)
		u.todaySubmit(t, "queued-by-today", "render")
		queued := u.waitTodayJob(t, "queued-by-today", job.Queued)
		// The rollback deploys as the upgrade did: the previous stack starts,
		// the API URL moves to it, today's stops.
		u.old.ddb.outboxDown.Store(false)
		u.old.sqs.releaseReceives()
		u.startOldStack(t)
		u.stopToday(t)
		u.open(t, "rollback-held")
		u.open(t, "queued-by-today")
		for _, id := range []string{held.ID, queued.ID} {
			u.waitOld(t, id, "succeeded")
		}
		for _, id := range wideJobs {
			u.waitOld(t, id, "succeeded")
		}
		u.oldAgent(t, "old-wide-1", "wide")
		u.open(t, "wide-after")
		u.oldSubmit(t, "wide-after", "acme", "batch", "")
		u.waitOld(t, "wide-after", "succeeded")
	})
}

// startServers starts the stage's embedded DynamoDB, SQS and S3 APIs and
// each release's proxies to them.
func (u *upgrade) startServers(t *testing.T) {
	var err error
	if u.ddb, err = localaws.StartDynamoDB(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.ddb.Close() })
	if u.sqs, err = localaws.SharedSQS(""); err != nil {
		t.Fatal(err)
	}
	if u.s3, err = localaws.StartS3(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.s3.Close() })
	for _, r := range []*releaseAWS{&u.old, &u.today} {
		*r = releaseAWS{ddb: newStageAWS(t, u.ddb.URL), sqs: newStageAWS(t, u.sqs.URL), s3: newStageAWS(t, u.s3.URL)}
	}
}

// startOldStack starts the previous release's `fleetq dev` on the stage and
// deploys its API behind the stage's URL.
func (u *upgrade) startOldStack(t *testing.T) {
	cfg, err := filepath.Abs(filepath.Join("testdata", "previous.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u.oldStack = start(t, "the previous release's dev stack", u.oldBin, u.old.environ(),
		"dev", "--addr", "127.0.0.1:0", "--no-local-fleet", "--config", cfg, "--fleet-secret", u.secret,
		"--operator-token", u.operator, "--log-level", "warn", "--tick", "1h")
	m := u.oldStack.waitLine(t, regexp.MustCompile(`^fleetq dev ready at (\S+)`))
	u.front.deploy(t, "previous", m[1])
}

// todayConfig is the stage's config as today's release reads it.
func (u *upgrade) todayConfig(t *testing.T) *fleetconfig.Config {
	cfg, err := fleetconfig.Load(filepath.Join("testdata", "today.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startToday starts today's dev stack on the stage with cfg: the fleets
// that accept a secret of their own keep the previous stage-wide one.
func (u *upgrade) startToday(t *testing.T, cfg *fleetconfig.Config) {
	logFile, err := os.Create(filepath.Join(t.TempDir(), "today.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("today's dev stack's log:\n%s", tail(b, 6000))
		}
	})
	log, err := logging.New(logFile, "warn")
	if err != nil {
		t.Fatal(err)
	}
	u.stack, err = devstack.Start(context.Background(), devstack.Options{
		Addr: "127.0.0.1:0", Config: cfg, OperatorToken: u.operator, FleetSecrets: map[string]string{"demo": u.secret, "wide": u.secret},
		// The upgrade keeps the previous release's webhook key, which its
		// receivers hold, as the new key's previous one for a window.
		PreviousWebhookKey: previousWebhookKey(u.secret), PreviousWebhookKeyUntil: time.Now().Add(14 * 24 * time.Hour),
		Logger: log, Fleet: devstack.FleetOptions{NoLocalFleet: true, Tick: time.Hour},
		DynamoDBEndpoint: u.today.ddb.URL(), SQSEndpoint: u.today.sqs.URL(), S3Endpoint: u.today.s3.URL(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.stopToday(t) })
}

// todaySubmit submits a job of acme to today's API as the operator.
func (u *upgrade) todaySubmit(t *testing.T, id, workflow string) {
	t.Helper()
	if status, body := u.call(t, http.MethodPost, "/api/jobs", u.operator, submission(id, "acme", workflow, "")); status != http.StatusAccepted && status != http.StatusOK {
		t.Fatalf("submit %s to today's API: %d %s", id, status, body)
	}
}

func (u *upgrade) stopToday(t *testing.T) {
	if u.stack != nil {
		if err := u.stack.Close(); err != nil {
			t.Errorf("today's dev stack: %v", err)
		}
		u.stack = nil
	}
}

// agentArgs are `fleetq worker`'s flags for an agent of fleet outside AWS,
// joined with the previous release's fleet secret, whose jobs wait for
// their gate (open).
func (u *upgrade) agentArgs(t *testing.T, id, fleet string) []string {
	state := filepath.Join(u.states, id)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	command := fmt.Sprintf(`f=%s/"$FLEETQ_JOB_ID"; while [ ! -e "$f" ]; do sleep 0.05; done; cat >/dev/null; echo '{"by":"%s"}'`, u.gates, id)
	return []string{"worker", "--api", u.front.srv.URL, "--fleet", fleet, "--stage", "dev", "--worker-id", id,
		"--fleet-secret", u.secret, "--runner", "exec", "--exec", command, "--no-imds", "--no-gpu-check",
		"--xid-source", "none", "--state-dir", state, "--log-level", "info"}
}

// oldAgent starts the previous release's `fleetq worker`.
func (u *upgrade) oldAgent(t *testing.T, id, fleet string) *process {
	return start(t, "previous agent "+id, u.oldBin, nil, u.agentArgs(t, id, fleet)...)
}

// apiWorkers reads a fleet's workers from the stage's API as an operator,
// as fleetq doctor does.
type apiWorkers struct{ u *upgrade }

func (a apiWorkers) Workers(_ context.Context, _ string, fleet string) ([]wire.Worker, error) {
	req, err := http.NewRequest(http.MethodGet, a.u.front.srv.URL+wire.PathAdminWorkers+"?fleet="+fleet, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.u.operator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", wire.PathAdminWorkers, resp.Status)
	}
	var out wire.WorkersResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	return out.Workers, nil
}

// open lets the command of the job a producer named id finish, whichever
// id its release files it under (bare, or scoped to its tenant).
func (u *upgrade) open(t *testing.T, id string) {
	for _, name := range []string{id, tenant.JobID("acme", id), tenant.JobID("capped", id)} {
		if err := os.WriteFile(filepath.Join(u.gates, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func submission(id, tenantID, workflow, callback string) map[string]any {
	s := map[string]any{"job_id": id, "tenant_id": tenantID, "workflow_id": workflow, "input": map[string]any{"job": id}}
	if callback != "" {
		s["callback_url"] = callback
	}
	return s
}

// call sends a request to the stage's API with a bearer credential.
func (u *upgrade) call(t *testing.T, method, path, cred string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u.front.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// oldSubmit submits a job to the previous API as its operator (its dev
// stack's producer credential).
func (u *upgrade) oldSubmit(t *testing.T, id, tenantID, workflow, callback string) {
	t.Helper()
	if status, body := u.call(t, http.MethodPost, "/api/jobs", u.operator, submission(id, tenantID, workflow, callback)); status != http.StatusAccepted {
		t.Fatalf("submit %s to the previous API: %d %s", id, status, body)
	}
}

// waitOld waits until the previous API answers the job with status.
func (u *upgrade) waitOld(t *testing.T, id, status string) {
	t.Helper()
	testenv.Eventually(t, "job "+id+" "+status+" on the previous API", testenv.Ticks(t, 50*time.Millisecond), func() bool {
		code, body := u.call(t, http.MethodGet, "/api/jobs/"+id, u.operator, nil)
		var j struct {
			Status string `json:"status"`
		}
		return code == http.StatusOK && json.Unmarshal(body, &j) == nil && j.Status == status
	})
}

// oldWorkerListed reports whether the previous API lists the worker.
func (u *upgrade) oldWorkerListed(t *testing.T, id string) bool {
	code, body := u.call(t, http.MethodGet, "/api/admin/workers", u.operator, nil)
	return code == http.StatusOK && bytes.Contains(body, []byte(`"`+id+`"`))
}

// todayJob reads a job today's store holds under the id a producer gave,
// bare (the previous release's) or scoped to its tenant (today's).
func (u *upgrade) todayJob(id string) (job.Job, bool) {
	for _, k := range []string{id, tenant.JobID("acme", id), tenant.JobID("capped", id)} {
		if j, err := u.stack.Store.GetJob(context.Background(), k); err == nil {
			return j, true
		}
	}
	return job.Job{}, false
}

// waitTodayJob waits until today's store holds the job in status.
func (u *upgrade) waitTodayJob(t *testing.T, id string, status job.Status) job.Job {
	t.Helper()
	var j job.Job
	testenv.Eventually(t, "job "+id+" "+string(status), testenv.Ticks(t, 50*time.Millisecond), func() bool {
		var ok bool
		j, ok = u.todayJob(id)
		return ok && j.Status == status
	})
	return j
}

// waitQueueDrained waits until the submission queue holds nothing, visible
// or in flight: today's dispatch has handled every submission.
func (u *upgrade) waitQueueDrained(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, "the submission queue drained", testenv.Ticks(t, 100*time.Millisecond), func() bool {
		out, err := u.stack.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(u.stack.QueueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
		})
		if err != nil {
			return false
		}
		for _, n := range out.Attributes {
			if n != "0" {
				return false
			}
		}
		return true
	})
}

// apiKey creates an API key of the tenant on today's API.
func (u *upgrade) apiKey(t *testing.T, tenantID string) string {
	t.Helper()
	status, body := u.call(t, http.MethodPost, "/api/admin/keys", u.operator, map[string]any{"tenant_id": tenantID, "name": "upgrade"})
	var out struct {
		Key string `json:"key"`
	}
	if status != http.StatusCreated || json.Unmarshal(body, &out) != nil || out.Key == "" {
		t.Fatalf("create an API key of %s: %d %s", tenantID, status, body)
	}
	return out.Key
}

// recentOldEvents are the job events the previous stack published to its bus.
func (u *upgrade) recentOldEvents(t *testing.T) []jobevents.Event {
	t.Helper()
	status, body := u.call(t, http.MethodGet, "/local/events/recent?limit=1000", u.operator, nil)
	var out struct {
		Events []jobevents.Event `json:"events"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &out) != nil {
		t.Fatalf("the previous stack's events: %d %s", status, body)
	}
	return out.Events
}

// eventsOf are the events of the job a producer named id (bare or scoped).
func eventsOf(es []jobevents.Event, id string) []jobevents.Event {
	var out []jobevents.Event
	for _, e := range es {
		if e.Detail.JobID == id || strings.HasSuffix(e.Detail.JobID, tenant.JobSeparator+id) {
			out = append(out, e)
		}
	}
	return out
}

// previousWebhookKey is the key a receiver of the previous release verifies
// callbacks with: the hex HMAC-SHA256 of "fleetq-webhook-signing-v1" under
// the stage's fleet secret (that release's docs/api.md, "Webhooks").
func previousWebhookKey(fleetSecret string) string {
	m := hmac.New(sha256.New, []byte(fleetSecret))
	m.Write([]byte("fleetq-webhook-signing-v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// receiver is a producer's webhook endpoint as the previous release
// documented it: Fleetq-Signature is "v1=" and the hex HMAC-SHA256 of
// "<Fleetq-Timestamp>.<body>" under the key.
type receiver struct {
	srv     *httptest.Server
	key     string
	mu      sync.Mutex
	got     []delivery
	changed chan struct{}
}

type delivery struct {
	jobID, eventID string
	verified       bool
}

func newReceiver(t *testing.T, key string) *receiver {
	rc := &receiver{key: key, changed: make(chan struct{}, 1)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var d struct {
			Detail struct {
				JobID string `json:"job_id"`
			} `json:"detail"`
		}
		_ = json.Unmarshal(body, &d)
		ts := r.Header.Get("Fleetq-Timestamp")
		_, terr := strconv.ParseInt(ts, 10, 64)
		m := hmac.New(sha256.New, []byte(rc.key))
		m.Write([]byte(ts + "."))
		m.Write(body)
		ok := terr == nil && hmac.Equal([]byte(r.Header.Get("Fleetq-Signature")), []byte("v1="+hex.EncodeToString(m.Sum(nil))))
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{jobID: d.Detail.JobID, eventID: r.Header.Get("Fleetq-Event-Id"), verified: ok})
		rc.mu.Unlock()
		select {
		case rc.changed <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// of are the deliveries of the job a producer named id.
func (rc *receiver) of(id string) []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []delivery
	for _, d := range rc.got {
		if d.jobID == id || strings.HasSuffix(d.jobID, tenant.JobSeparator+id) {
			out = append(out, d)
		}
	}
	return out
}
