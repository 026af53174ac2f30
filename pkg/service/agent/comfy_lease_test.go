package agent_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// comfyInput is comfyWorkflow's job input with a URL for node 10's file.
func comfyInput() string {
	var in map[string]any
	_ = json.Unmarshal(comfyWorkflow("sdxl.safetensors", "", 1), &in)
	in["outputs"] = []string{"second"}
	raw, _ := json.Marshal(in)
	return string(raw)
}

// postedIDs answers the prompt ids of every POST /prompt the server took.
func (c *comfyServer) postedIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, p := range c.posts {
		var id string
		_ = json.Unmarshal(p["prompt_id"], &id)
		ids = append(ids, id)
	}
	return ids
}

// ended is a job that finished, or failed an attempt: what each test below
// waits for before it judges the outcome.
func (e *stackEnv) ended(id string, attempts int) bool {
	j := e.job(id)
	return j.Status == job.Succeeded || j.Status == job.Dead || j.Status == job.Canceled || j.Attempts > attempts || j.Error != nil
}

// A SIGTERM mid-run requeues a ComfyUI job without spending an attempt
// (the runner interrupts its prompt on the way out); leased again on the
// same ComfyUI, on the same attempt number, it runs under a new prompt id
// and succeeds — it does not adopt the interrupted run's history entry.
func TestComfyUIJobRequeuedByShutdownSucceedsOnTheSameAttempt(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	comfy, srv := newComfyServer(t)
	posted := make(chan string, 8)
	comfy.set(func(c *comfyServer) { c.hold, c.posted = true, posted })
	r := agent.ComfyUIRunner{URL: srv.URL, PollEvery: 20 * time.Millisecond}
	e.create("cr", comfyInput())
	first := e.start("comfy-a", r)
	testenv.Receive(t, "the first prompt", posted)
	e.waitFor("the prompt to run", func() bool { _, _, _, _, running := comfy.snapshot(); return running })
	leased := e.job("cr")
	if leased.Status != job.Leased {
		t.Fatalf("cr is %s while its prompt runs", leased.Status)
	}
	first.a.Drain() // what the worker command does on SIGTERM
	if err := first.wait(t); err != nil {
		t.Fatal(err)
	}
	if j := e.job("cr"); j.Status != job.Queued || j.Preemptions != 1 {
		t.Fatalf("after the shutdown: %s, %d preemptions", j.Status, j.Preemptions)
	}
	if _, _, interrupts, _, _ := comfy.snapshot(); len(interrupts) != 1 {
		t.Fatalf("interrupts %v: the shutdown takes its running prompt back", interrupts)
	}
	comfy.set(func(c *comfyServer) { c.hold = false })
	e.start("comfy-b", r)
	e.waitFor("cr to finish", func() bool { return e.ended("cr", leased.Attempts) })
	j := e.job("cr")
	if j.Status != job.Succeeded || j.Attempts != leased.Attempts || j.Error != nil {
		t.Fatalf("cr %s on attempt %d (the first lease was attempt %d), error %+v", j.Status, j.Attempts, leased.Attempts, j.Error)
	}
	ids := comfy.postedIDs()
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("prompt ids %v: each lease posts its own", ids)
	}
	// Both runs keep their log: the interrupted one is not overwritten by
	// the run that took its attempt again.
	logs := e.jobLogs("cr")
	if len(logs) != 2 || !strings.Contains(logs[0], "prompt "+ids[0]) || strings.Contains(logs[0], ids[1]) ||
		!strings.Contains(logs[1], "prompt "+ids[1]) || strings.Contains(logs[1], ids[0]) {
		t.Fatalf("logs of cr, one per run: %q", logs)
	}
}

// An operator's retry of a dead job resets its attempts; the next lease,
// on the same ComfyUI and with the same attempt number as the one that
// died, runs the workflow again and succeeds.
func TestComfyUIDeadJobRetriedByAnOperatorRunsAgain(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	comfy, srv := newComfyServer(t)
	comfy.set(func(c *comfyServer) { c.outcome = "error" })
	e.create("cd", comfyInput())
	e.start("comfy", agent.ComfyUIRunner{URL: srv.URL, PollEvery: 20 * time.Millisecond})
	e.waitFor("cd to die", func() bool { return e.job("cd").Status == job.Dead })
	died := e.job("cd")
	comfy.set(func(c *comfyServer) { c.outcome = "success" })
	if _, err := e.stack.Store.RetryDead(e.ctx, "cd"); err != nil {
		t.Fatal(err)
	}
	e.waitFor("cd to run again", func() bool { j := e.job("cd"); return j.Status != job.Queued && j.Status != job.Leased })
	j := e.job("cd")
	if j.Status != job.Succeeded || j.Attempts != died.Attempts {
		t.Fatalf("after the retry: %s on attempt %d (it died on attempt %d), error %+v", j.Status, j.Attempts, died.Attempts, j.Error)
	}
	if ids := comfy.postedIDs(); len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("prompt ids %v: the retry posts its own", ids)
	}
}

// A ComfyUI job's log says what ComfyUI did: its prompt id, each node as
// it started and finished (cached ones too), how long each took, the files
// delivered — and for a failed run, ComfyUI's error and traceback.
func TestComfyUIJobLogListsItsNodes(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	comfy, srv := newComfyServer(t)
	comfy.set(func(c *comfyServer) { c.cached = []string{"4"} })
	e.create("cl", comfyInput())
	e.start("comfy", agent.ComfyUIRunner{URL: srv.URL, PollEvery: 20 * time.Millisecond})
	e.waitFor("cl to succeed", func() bool { return e.job("cl").Status == job.Succeeded })
	logs := e.jobLogs("cl")
	if len(logs) != 1 {
		t.Fatalf("%d logs", len(logs))
	}
	log := logs[0]
	if testing.Verbose() {
		t.Logf("the log of cl:\n%s", log)
	}
	ids := comfy.postedIDs()
	for _, want := range []string{
		"prompt " + ids[0] + " queued",
		"node 4 (CheckpointLoaderSimple) cached",
		"node 3 (KSampler) started",
		"node 3 (KSampler) finished in ",
		"node 8 (VAEDecode) started",
		"node 9 (SaveImage) finished in ",
		"node 10 (SaveImage) finished in ",
		"prompt finished: success in ",
		"output nine_", "_.png of node 9 (SaveImage) delivered to output_url\n",
		"output ten_", "_.png of node 10 (SaveImage) delivered to output_urls[second]\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "X-Amz-") || strings.Contains(log, "Signature=") {
		t.Errorf("the log holds a presigned URL:\n%s", log)
	}

	comfy.set(func(c *comfyServer) { c.outcome = "error" })
	e.create("cf", comfyInput())
	e.waitFor("cf to die", func() bool { return e.job("cf").Status == job.Dead })
	failed := e.jobLogs("cf")[0]
	for _, want := range []string{
		"node 3 (KSampler) failed: RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x768 and 1024x320)",
		`File "execution.py", line 1`,
		"prompt finished: error in ",
	} {
		if !strings.Contains(failed, want) {
			t.Errorf("the failed run's log lacks %q:\n%s", want, failed)
		}
	}
}
