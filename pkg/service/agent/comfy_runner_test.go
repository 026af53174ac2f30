package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// comfyWorkflow is a text-to-image workflow in ComfyUI's API format with
// SaveImage nodes 9 and 10 (10 sorts before 9 as a string); ckpt10, when
// set, gives node 10 its own checkpoint loader.
func comfyWorkflow(ckpt, ckpt10 string, batch9 int) json.RawMessage {
	wf := map[string]any{
		"4":  map[string]any{"class_type": "CheckpointLoaderSimple", "inputs": map[string]any{"ckpt_name": ckpt}},
		"3":  map[string]any{"class_type": "KSampler", "inputs": map[string]any{"model": []any{"4", 0}, "seed": 1, "steps": 20}},
		"8":  map[string]any{"class_type": "VAEDecode", "inputs": map[string]any{"samples": []any{"3", 0}, "vae": []any{"4", 2}}},
		"9":  map[string]any{"class_type": "SaveImage", "inputs": map[string]any{"images": []any{"8", 0}, "filename_prefix": "nine", "batch": batch9}},
		"10": map[string]any{"class_type": "SaveImage", "inputs": map[string]any{"images": []any{"8", 0}, "filename_prefix": "ten"}},
	}
	if ckpt10 != "" {
		wf["11"] = map[string]any{"class_type": "CheckpointLoaderSimple", "inputs": map[string]any{"ckpt_name": ckpt10}}
		wf["10"].(map[string]any)["inputs"].(map[string]any)["images"] = []any{"11", 0}
	}
	raw, _ := json.Marshal(map[string]any{"prompt": wf})
	return raw
}

type progressLog struct {
	mu   sync.Mutex
	seen []float64
	ch   chan float64
}

func (p *progressLog) report(v float64) {
	p.mu.Lock()
	p.seen = append(p.seen, v)
	p.mu.Unlock()
	select {
	case p.ch <- v:
	default:
	}
}

func comfyJob(id string, input json.RawMessage, out, named string, blobURL string) (*agent.Job, *progressLog) {
	pl := &progressLog{ch: make(chan float64, 16)}
	j := &agent.Job{Lease: agent.Lease{JobID: id, Attempt: 1, LeaseToken: "lease-" + id, Input: input}, Progress: pl.report}
	if out != "" {
		j.OutputURL = blobURL + out
	}
	if named != "" {
		j.OutputURLs = map[string]string{"second": blobURL + named}
	}
	return j, pl
}

func runComfy(t *testing.T, r agent.Runner, j *agent.Job) (json.RawMessage, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	return r.Run(ctx, j)
}

func TestComfyUIRunnerDeliversEveryOutputInNodeOrderWithProgress(t *testing.T) {
	t.Parallel()
	comfy, srv := newComfyServer(t)
	comfy.set(func(c *comfyServer) { c.hold = true })
	store, blobSrv := newBlobs(t)
	store.objs["/in/init.png"] = []byte("INIT")
	r := agent.ComfyUIRunner{URL: srv.URL, PollEvery: 20 * time.Millisecond, ExtraData: map[string]any{"api_key_comfy_org": "k-1"}}
	if err := r.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	j, pl := comfyJob("c1", comfyWorkflow("sdxl.safetensors", "", 1), "/out/output", "/out/second", blobSrv.URL)
	j.InputURLs = map[string]string{"init": blobSrv.URL + "/in/init.png"}
	id := agent.PromptID("c1", "lease-c1")
	type outcome struct {
		res json.RawMessage
		err error
	}
	done := make(chan outcome, 1)
	go func() { res, err := runComfy(t, r, j); done <- outcome{res, err} }()
	// The websocket's progress message (10 of 20 steps of the first node)
	// arrives while the prompt runs.
	if p := testenv.Receive(t, "progress while the prompt ran", pl.ch); p <= 0 || p >= 1 {
		t.Fatalf("progress %v", p)
	}
	comfy.finish(id)
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if comfy.uploads["init"] != "INIT" {
		t.Fatalf("uploads %v", comfy.uploads)
	}
	// Node 9 before node 10, and both files delivered.
	if got := store.get("/out/output"); !strings.HasPrefix(got, "bytes of nine_") {
		t.Fatalf("output %q", got)
	}
	if got := store.get("/out/second"); !strings.HasPrefix(got, "bytes of ten_") {
		t.Fatalf("second output %q", got)
	}
	if !strings.Contains(string(o.res), id) {
		t.Fatalf("result %s", o.res)
	}
	comfy.mu.Lock()
	post := comfy.posts[0]
	comfy.mu.Unlock()
	var sent struct {
		PromptID  string         `json:"prompt_id"`
		ClientID  string         `json:"client_id"`
		ExtraData map[string]any `json:"extra_data"`
	}
	raw, _ := json.Marshal(post)
	_ = json.Unmarshal(raw, &sent)
	if sent.PromptID != id || sent.ClientID == "" || sent.ExtraData["api_key_comfy_org"] != "k-1" {
		t.Fatalf("posted %s", raw)
	}
	if agent.PromptID("c1", "another-lease") == id || agent.PromptID("c1", "lease-c1") != id {
		t.Fatal("a prompt id is the same for one lease and new for every lease")
	}
}

func TestComfyUIRunnerOutcomeClasses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		outcome   string
		input     json.RawMessage
		named     bool
		code      string
		retryable bool
		msg       string
	}{
		{"error message under status success", "error_in_success", comfyWorkflow("sdxl.safetensors", "", 1), true, "comfyui_execution", false, "Dependency cycle"},
		{"execution error", "error", comfyWorkflow("sdxl.safetensors", "", 1), true, "comfyui_execution", false, "node 3 (KSampler): mat1 and mat2"},
		{"out of GPU memory", "oom", comfyWorkflow("sdxl.safetensors", "", 1), true, "comfyui_oom", true, "KSampler"},
		{"interrupted by someone else", "interrupted", comfyWorkflow("sdxl.safetensors", "", 1), true, "comfyui_interrupted", true, "did not ask"},
		{"previews only, no output file", "success", json.RawMessage(strings.ReplaceAll(string(comfyWorkflow("sdxl.safetensors", "", 1)), "SaveImage", "PreviewImage")), true, "comfyui_no_outputs", false, "no output file"},
		{"an output node produced nothing", "drop_output", comfyWorkflow("sdxl.safetensors", "", 1), true, "comfyui_missing_outputs", false, "10 (SaveImage)"},
		{"lost by a restart", "lost", comfyWorkflow("sdxl.safetensors", "", 1), true, "comfyui_prompt_lost", true, "restart"},
		{"more files than URLs", "success", comfyWorkflow("sdxl.safetensors", "", 3), true, "comfyui_too_many_outputs", false, "saved 4 files but the job has 2 output URLs"},
		{"missing model", "success", comfyWorkflow("nope.safetensors", "", 1), true, "comfyui_missing_model", false, "this machine has ckpt_name: sdxl.safetensors, flux1-dev.safetensors"},
		{"partial node errors", "success", comfyWorkflow("sdxl.safetensors", "gone.safetensors", 1), true, "comfyui_missing_model", false, "only part of the workflow; node 11 (CheckpointLoaderSimple): Value not in list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			comfy, srv := newComfyServer(t)
			comfy.set(func(s *comfyServer) { s.outcome = c.outcome })
			_, blobSrv := newBlobs(t)
			named := ""
			if c.named {
				named = "/out/second"
			}
			j, _ := comfyJob("j-"+c.outcome, c.input, "/out/output", named, blobSrv.URL)
			_, err := runComfy(t, agent.ComfyUIRunner{URL: srv.URL, PollEvery: 10 * time.Millisecond}, j)
			var je *agent.JobError
			if !errors.As(err, &je) || je.Code != c.code || je.Retryable != c.retryable || !strings.Contains(je.Message, c.msg) {
				t.Fatalf("got %#v", err)
			}
			if c.name == "partial node errors" {
				_, deleted, _, pending, _ := comfy.snapshot()
				if len(deleted) != 1 || deleted[0] != agent.PromptID(j.JobID, j.LeaseToken) || pending != 0 {
					t.Fatalf("the partly valid prompt was not taken back: deleted %v, pending %d", deleted, pending)
				}
			}
		})
	}
}

func TestComfyUIRunnerOlderBuildAndPollingOnly(t *testing.T) {
	t.Parallel()
	// A ComfyUI that predates client prompt ids and history status: the
	// runner follows the id it answers, and an entry means finished.
	comfy, srv := newComfyServer(t)
	comfy.set(func(c *comfyServer) { c.oldBuild = true })
	store, blobSrv := newBlobs(t)
	j, _ := comfyJob("old", comfyWorkflow("sdxl.safetensors", "", 1), "/out/output", "/out/second", blobSrv.URL)
	res, err := runComfy(t, agent.ComfyUIRunner{URL: srv.URL, PollEvery: 10 * time.Millisecond, NoWebsocket: true}, j)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res), agent.PromptID("old", "lease-old")) || !strings.HasPrefix(store.get("/out/output"), "bytes of nine_") {
		t.Fatalf("result %s, output %q", res, store.get("/out/output"))
	}
}

func TestComfyUIRunnerRidesOutDroppedConnections(t *testing.T) {
	t.Parallel()
	comfy, srv := newComfyServer(t)
	// Three reads lose their connection, and the answer to the queued
	// prompt is lost: the prompt is found, not queued twice.
	comfy.set(func(c *comfyServer) { c.refuse, c.dropPost = 3, 1 })
	store, blobSrv := newBlobs(t)
	j, _ := comfyJob("flaky", comfyWorkflow("sdxl.safetensors", "", 1), "/out/output", "/out/second", blobSrv.URL)
	if _, err := runComfy(t, agent.ComfyUIRunner{URL: srv.URL, PollEvery: 10 * time.Millisecond}, j); err != nil {
		t.Fatal(err)
	}
	if posts, _, _, _, _ := comfy.snapshot(); posts != 1 {
		t.Fatalf("prompt posted %d times", posts)
	}
	if !strings.HasPrefix(store.get("/out/output"), "bytes of nine_") {
		t.Fatal("no output")
	}
	// A ComfyUI that stays unreachable past the bound is a retryable failure.
	comfy.set(func(c *comfyServer) { c.refuse = 1 << 30 })
	j2, _ := comfyJob("down", comfyWorkflow("sdxl.safetensors", "", 1), "/out/output", "/out/second", blobSrv.URL)
	_, err := runComfy(t, agent.ComfyUIRunner{URL: srv.URL, PollEvery: 10 * time.Millisecond, UnreachableFor: 100 * time.Millisecond}, j2)
	var je *agent.JobError
	if !errors.As(err, &je) || !je.Retryable || je.Code != "comfyui_unreachable" {
		t.Fatalf("unreachable: %#v", err)
	}
	// Nothing listening at all.
	_, err = runComfy(t, agent.ComfyUIRunner{URL: "http://127.0.0.1:1", PollEvery: 10 * time.Millisecond, UnreachableFor: 50 * time.Millisecond}, j2)
	if !errors.As(err, &je) || !je.Retryable {
		t.Fatalf("no server: %#v", err)
	}
	if err := (agent.ComfyUIRunner{URL: "http://127.0.0.1:1"}).Ready(context.Background()); err == nil {
		t.Fatal("ready without a server")
	}
	// Not a workflow.
	bad, _ := comfyJob("bad", json.RawMessage(`{"prompt":"a cat"}`), "", "", blobSrv.URL)
	if _, err := runComfy(t, agent.ComfyUIRunner{URL: srv.URL}, bad); !errors.As(err, &je) || je.Retryable || je.Code != "bad_input" {
		t.Fatalf("bad input: %#v", err)
	}
}

func TestComfyUIRunnerCancelTakesBackOnlyItsOwnPrompt(t *testing.T) {
	t.Parallel()
	comfy, srv := newComfyServer(t)
	posted := make(chan string, 8)
	comfy.set(func(c *comfyServer) { c.hold, c.posted = true, posted })
	_, blobSrv := newBlobs(t)
	r := agent.ComfyUIRunner{URL: srv.URL, PollEvery: 10 * time.Millisecond}

	// Someone else's prompt runs; ours waits in the queue and is canceled:
	// it is deleted from the queue and the other prompt is not interrupted.
	other, _ := comfyJob("other", comfyWorkflow("sdxl.safetensors", "", 1), "/out/o", "/out/o2", blobSrv.URL)
	otherCtx, stopOther := context.WithCancel(context.Background())
	defer stopOther()
	otherDone := make(chan error, 1)
	go func() { _, err := r.Run(otherCtx, other); otherDone <- err }()
	<-posted
	mine, pl := comfyJob("mine", comfyWorkflow("sdxl.safetensors", "", 1), "/out/m", "/out/m2", blobSrv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	mineDone := make(chan error, 1)
	go func() { _, err := r.Run(ctx, mine); mineDone <- err }()
	<-posted
	cancel()
	if err := <-mineDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	_, deleted, interrupts, _, _ := comfy.snapshot()
	if fmt.Sprint(deleted) != fmt.Sprint([]string{agent.PromptID("mine", "lease-mine")}) || len(interrupts) != 0 {
		t.Fatalf("deleted %v, interrupts %v", deleted, interrupts)
	}
	_ = pl
	// The running prompt, canceled, is interrupted by its own id.
	stopOther()
	if err := <-otherDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("other: %v", err)
	}
	_, _, interrupts, _, _ = comfy.snapshot()
	if fmt.Sprint(interrupts) != fmt.Sprint([]string{agent.PromptID("other", "lease-other")}) {
		t.Fatalf("interrupts %v", interrupts)
	}
}

// One ComfyUI per GPU: two jobs at once run on the two servers, a third
// finds none free.
func TestComfyUIPoolRoutesEachJobToAFreeServer(t *testing.T) {
	t.Parallel()
	gpu0, srv0 := newComfyServer(t)
	gpu1, srv1 := newComfyServer(t)
	posted := make(chan string, 8)
	for _, c := range []*comfyServer{gpu0, gpu1} {
		c.set(func(c *comfyServer) { c.hold, c.posted = true, posted })
	}
	_, blobSrv := newBlobs(t)
	pool := agent.NewComfyUIPool(agent.ComfyUIRunner{PollEvery: 10 * time.Millisecond}, []string{srv0.URL, srv1.URL})
	done := make(chan error, 2)
	for _, id := range []string{"a", "b"} {
		j, _ := comfyJob(id, comfyWorkflow("sdxl.safetensors", "", 1), "/out/"+id, "/out/"+id+"2", blobSrv.URL)
		go func() { _, err := runComfy(t, pool, j); done <- err }()
	}
	<-posted
	<-posted
	if n0, _, _, _, _ := gpu0.snapshot(); n0 != 1 {
		t.Fatalf("server 0 got %d prompts", n0)
	}
	if n1, _, _, _, _ := gpu1.snapshot(); n1 != 1 {
		t.Fatalf("server 1 got %d prompts", n1)
	}
	if err := pool.Ready(context.Background()); err == nil {
		t.Fatal("ready with every server busy")
	}
	j, _ := comfyJob("c", comfyWorkflow("sdxl.safetensors", "", 1), "/out/c", "", blobSrv.URL)
	var je *agent.JobError
	if _, err := runComfy(t, pool, j); !errors.As(err, &je) || je.Code != "comfyui_busy" {
		t.Fatalf("third job: %#v", err)
	}
	gpu0.set(func(c *comfyServer) { c.hold = false })
	gpu1.set(func(c *comfyServer) { c.hold = false })
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := pool.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A ComfyUI job's progress reaches the job record through the heartbeats
// (GET /api/jobs/{id} shows it), then the job succeeds.
func TestComfyUIProgressReachesTheJob(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	comfy, srv := newComfyServer(t)
	comfy.set(func(c *comfyServer) { c.hold = true })
	var in map[string]any
	_ = json.Unmarshal(comfyWorkflow("sdxl.safetensors", "", 1), &in)
	in["outputs"] = []string{"second"} // a URL for node 10's file
	raw, _ := json.Marshal(in)
	e.create("cj", string(raw))
	e.start("comfy", agent.ComfyUIRunner{URL: srv.URL, PollEvery: 20 * time.Millisecond})
	e.waitFor("progress on the job", func() bool {
		p := e.job("cj").Progress
		return p != nil && *p > 0 && *p < 1
	})
	comfy.finish(agent.PromptID("cj", e.job("cj").LeaseToken))
	e.waitFor("cj to end", func() bool { return e.job("cj").Status != job.Leased })
	if j := e.job("cj"); j.Status != job.Succeeded {
		t.Fatalf("cj %s: %+v", j.Status, j.Error)
	}
}

// ComfyUI accepts a prompt id it has seen and keeps the earlier run's
// history entry until the new run ends. Should two runs ever share an id,
// the second does not take the first's entry for its own outcome: the
// entry's queue number is the first run's, not the one ComfyUI answered
// the second post with.
func TestComfyUIRunnerNeverAdoptsAnEarlierRunsHistory(t *testing.T) {
	t.Parallel()
	comfy, srv := newComfyServer(t)
	posted := make(chan string, 8)
	comfy.set(func(c *comfyServer) { c.hold, c.posted = true, posted })
	store, blobSrv := newBlobs(t)
	r := agent.ComfyUIRunner{URL: srv.URL, PollEvery: 10 * time.Millisecond}
	first, _ := comfyJob("same", comfyWorkflow("sdxl.safetensors", "", 1), "/out/a", "/out/a2", blobSrv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := r.Run(ctx, first); done <- err }()
	id := <-posted
	for {
		if _, _, _, _, running := comfy.snapshot(); running {
			break
		}
		res, err := http.Get(srv.URL + "/queue") // each read moves the fake's queue a step
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	comfy.set(func(c *comfyServer) { c.hold = false })
	second, _ := comfyJob("same", comfyWorkflow("sdxl.safetensors", "", 1), "/out/b", "/out/b2", blobSrv.URL)
	if _, err := runComfy(t, r, second); err != nil {
		t.Fatalf("the second run took the first's interrupted entry: %v", err)
	}
	if again := <-posted; again != id {
		t.Fatalf("the runs did not share a prompt id (%s, %s): the test proves nothing", id, again)
	}
	if !strings.HasPrefix(store.get("/out/b"), "bytes of nine_") {
		t.Fatalf("second output %q", store.get("/out/b"))
	}
}
