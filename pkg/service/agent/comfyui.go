package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// ComfyUIRunner runs a job's input.prompt — a workflow in ComfyUI's API
// format — on the ComfyUI server of this machine (docs/worker.md lists the
// steps and the outcome classes):
//
//  1. each input_urls file is uploaded with /upload/image under its name;
//  2. /ws?clientId= is followed for progress and completion;
//  3. the workflow is queued with POST /prompt under a prompt_id derived
//     from the job and its lease token: the same for a re-sent post, so a
//     post whose answer was lost is found, not queued twice; new for every
//     lease, so no run is taken for another's;
//  4. GET /history/{prompt_id} is the source of truth for the outcome
//     (read when the websocket says the prompt ended, and polled as a
//     fallback); /queue tells a queued or running prompt from a lost one;
//  5. every output file is fetched with /view and PUT to the job's output
//     URLs in numeric node order.
//
// What ComfyUI did goes to the job's log (comfyLog): the prompt id, each
// node as it starts and finishes, ComfyUI's error and traceback, and the
// files delivered.
type ComfyUIRunner struct {
	URL string // default http://127.0.0.1:8188
	// HTTP talks to ComfyUI (default: a client with a 60s timeout).
	HTTP *http.Client
	// PollEvery is how often /history is read (default 1s, on the job's
	// clock).
	PollEvery time.Duration
	// UnreachableFor bounds how long connection errors to ComfyUI are
	// retried inside one job (default 1m) before the attempt fails
	// retryably.
	UnreachableFor time.Duration
	// ExtraData is sent as every prompt's extra_data (for example
	// ComfyUI's api_key_comfy_org for API nodes); it comes from the
	// worker's configuration, never from a job's input.
	ExtraData map[string]any
	// NoWebsocket follows the prompt by polling /history only.
	NoWebsocket bool
}

func (r ComfyUIRunner) base() string {
	if r.URL == "" {
		return "http://127.0.0.1:8188"
	}
	return strings.TrimRight(r.URL, "/")
}

func (r ComfyUIRunner) http() *http.Client {
	if r.HTTP != nil {
		return r.HTTP
	}
	return &http.Client{Timeout: 60 * time.Second}
}

func (r ComfyUIRunner) unreachableFor() time.Duration {
	if r.UnreachableFor > 0 {
		return r.UnreachableFor
	}
	return time.Minute
}

// Ready answers nil once ComfyUI's /system_stats answers with its devices.
func (r ComfyUIRunner) Ready(ctx context.Context) error {
	var stats struct {
		Devices []json.RawMessage `json:"devices"`
	}
	status, err := r.getJSON(ctx, "/system_stats", &stats)
	if err != nil {
		return fmt.Errorf("comfyui not reachable: %w", err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("comfyui /system_stats answered %d", status)
	}
	return nil
}

type comfyFile struct {
	Filename  string `json:"filename"`
	Subfolder string `json:"subfolder"`
	Type      string `json:"type"`
}

type comfyNode struct {
	ClassType string                     `json:"class_type"`
	Inputs    map[string]json.RawMessage `json:"inputs"`
}

// comfyRun is one job's prompt on ComfyUI.
type comfyRun struct {
	r        ComfyUIRunner
	j        *Job
	clk      clock.Clock
	log      *comfyLog
	id       string // the prompt id ComfyUI runs the prompt under
	clientID string
	// number is the queue number ComfyUI answered the post with (when
	// known): its history entry carries it, so an entry left by an
	// earlier prompt under the same id is never taken for this one's.
	number    json.Number
	nodes     map[string]comfyNode
	progress  float64
	done      map[string]bool // nodes executed or cached (for progress)
	current   string          // the node executing now
	currentAt time.Time       // when it started
	// failedNode ran for failedIn when the websocket said the prompt
	// failed; the history says which node failed and why.
	failedNode string
	failedIn   time.Duration
	ended      bool // the websocket said the prompt ended
}

// PromptID is the prompt id a lease of a job is queued under: the same for
// every post within one lease (a post whose answer was lost is found, not
// queued twice), new for every lease — a requeue that spends no attempt,
// an operator's retry that resets attempts, a lease that expired — so no
// run is ever taken for an earlier one, on the same ComfyUI or on one
// restarted since. The lease token is a fresh random value per lease.
func PromptID(jobID, leaseToken string) string {
	if leaseToken == "" {
		return uuid.NewString() // outside a lease: a run of its own
	}
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("fleetq:lease:"+jobID+"#"+leaseToken)).String()
}

// Run runs one job's workflow on ComfyUI and delivers its output files.
func (r ComfyUIRunner) Run(ctx context.Context, j *Job) (json.RawMessage, error) {
	var in struct {
		Prompt json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(j.Input, &in); err != nil || len(in.Prompt) == 0 || in.Prompt[0] != '{' {
		return nil, Permanent(CodeBadInput, "comfyui: input.prompt must be a workflow in ComfyUI's API format (a JSON object)")
	}
	run := &comfyRun{r: r, j: j, clk: j.clock(), id: PromptID(j.JobID, j.LeaseToken), done: map[string]bool{}}
	run.clientID = "fleetq-" + run.id
	if err := json.Unmarshal(in.Prompt, &run.nodes); err != nil {
		return nil, Permanent(CodeBadInput, "comfyui: input.prompt is not a workflow in ComfyUI's API format: %v", err)
	}
	run.log = newComfyLog(j.logWriter(), run.clk, run.nodes)
	if len(j.InputURLs) > 0 {
		dir, err := os.MkdirTemp("", "fleetq-comfy-")
		if err != nil {
			return nil, Retryable(CodeWorkdir, "create input directory: %v", err)
		}
		defer os.RemoveAll(dir)
		paths, err := fetchInputs(ctx, j.HTTP, j.InputURLs, dir)
		if err != nil {
			return nil, err
		}
		for _, name := range sortedKeys(paths) {
			if err := r.uploadImage(ctx, name, paths[name]); err != nil {
				return nil, err
			}
		}
	}
	wsCtx, stopWS := context.WithCancel(ctx)
	defer stopWS()
	var events <-chan comfyEvent
	if !r.NoWebsocket {
		events = r.watch(wsCtx, run.clientID)
	}
	if err := run.queue(ctx, in.Prompt); err != nil {
		if ctx.Err() != nil {
			run.cancel()
			run.log.printf("stopped by fleetq before the prompt was queued: the prompt is taken back")
			return nil, ctx.Err()
		}
		run.log.printf("%v", err)
		return nil, err
	}
	hist, err := run.follow(ctx, events)
	if err != nil {
		if ctx.Err() != nil {
			run.cancel()
			run.log.printf("stopped by fleetq (canceled, lease lost or shutting down): prompt %s taken back", run.id)
			return nil, ctx.Err()
		}
		run.log.printf("%v", err)
		return nil, err
	}
	run.log.finished(hist)
	outputs, err := run.judge(ctx, hist)
	if err != nil {
		return nil, err
	}
	return run.deliver(ctx, outputs)
}

func (r ComfyUIRunner) uploadImage(ctx context.Context, name, path string) error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("image", name)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return Retryable(CodeInputRead, "read input %q: %v", name, err)
	}
	_, err = io.Copy(fw, f)
	f.Close()
	if err != nil {
		return Retryable(CodeInputRead, "read input %q: %v", name, err)
	}
	_ = mw.WriteField("overwrite", "true")
	if err := mw.Close(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base()+"/upload/image", &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, err := r.http().Do(req)
	if err != nil {
		return Retryable(CodeComfyUIUnreachable, "upload %q to comfyui: %v", name, err)
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return Retryable(CodeComfyUIUpload, "comfyui /upload/image answered %s: %s", res.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// getJSON GETs path and decodes a 200 answer into out.
func (r ComfyUIRunner) getJSON(ctx context.Context, path string, out any) (int, error) {
	return r.call(ctx, http.MethodGet, path, nil, out)
}

// call sends a JSON body (nil: none) and decodes a non-empty 200 or 400
// answer into out (nil: discarded; ComfyUI explains a refused prompt in a
// 400's JSON). A transport error is returned as is, an answer that does not
// decode with its status; a status alone is not an error.
func (r ComfyUIRunner) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base()+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := r.http().Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return 0, err
	}
	if out != nil && (res.StatusCode == http.StatusOK || res.StatusCode == http.StatusBadRequest) && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return res.StatusCode, nil
}

// transient is a connection-level failure worth retrying while ComfyUI
// restarts or is busy.
func transient(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// retry runs f until it answers without a transient error, for at most
// UnreachableFor; the last transient error becomes comfyui_unreachable.
func (c *comfyRun) retry(ctx context.Context, what string, f func() error) error {
	var since time.Time
	for {
		err := f()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		if since.IsZero() {
			since = c.clk.Now()
		} else if c.clk.Now().Sub(since) >= c.r.unreachableFor() {
			return Retryable(CodeComfyUIUnreachable, "%s: comfyui unreachable for %s: %v", what, c.r.unreachableFor(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.clk.After(c.r.pollEvery()):
		}
	}
}

func (r ComfyUIRunner) pollEvery() time.Duration {
	if r.PollEvery > 0 {
		return r.PollEvery
	}
	return time.Second
}

type comfyNodeErrors map[string]struct {
	ClassType string `json:"class_type"`
	Errors    []struct {
		Type      string `json:"type"`
		Message   string `json:"message"`
		Details   string `json:"details"`
		ExtraInfo struct {
			InputName     string          `json:"input_name"`
			ReceivedValue json.RawMessage `json:"received_value"`
		} `json:"extra_info"`
	} `json:"errors"`
}

// queue posts the workflow under the run's prompt id, unless ComfyUI
// already has it (a post whose answer was lost).
func (c *comfyRun) queue(ctx context.Context, prompt json.RawMessage) error {
	body := map[string]any{"prompt": prompt, "client_id": c.clientID, "prompt_id": c.id}
	if len(c.r.ExtraData) > 0 {
		body["extra_data"] = c.r.ExtraData
	}
	var out struct {
		PromptID   string          `json:"prompt_id"`
		Number     json.Number     `json:"number"`
		Error      json.RawMessage `json:"error"`
		NodeErrors json.RawMessage `json:"node_errors"`
	}
	var status int
	tried, found := false, false
	err := c.retry(ctx, "queue prompt", func() error {
		if tried {
			if known, err := c.known(ctx); err != nil {
				return err
			} else if known {
				status, out.PromptID, found = http.StatusOK, c.id, true
				return nil
			}
		}
		tried = true
		var err error
		status, err = c.r.call(ctx, http.MethodPost, "/prompt", body, &out)
		return err
	})
	if err != nil {
		if je := (*JobError)(nil); errors.As(err, &je) || ctx.Err() != nil {
			return err
		}
		return Retryable(CodeComfyUIError, "queue prompt on comfyui: %v", err)
	}
	var nodeErrs comfyNodeErrors
	_ = json.Unmarshal(out.NodeErrors, &nodeErrs) // [] when there is no prompt
	switch {
	case status == http.StatusBadRequest:
		return c.rejected(ctx, out.Error, nodeErrs, "comfyui rejected the workflow")
	case status != http.StatusOK:
		return Retryable(CodeComfyUIError, "comfyui /prompt answered %d", status)
	case out.PromptID == "":
		return Retryable(CodeComfyUIError, "comfyui /prompt answered no prompt_id")
	}
	c.id = out.PromptID // a ComfyUI that predates client prompt ids picks its own
	c.number = out.Number
	c.log.queuedOn(c.id, c.r.base(), found)
	if len(nodeErrs) > 0 {
		// ComfyUI dropped the invalid outputs and runs the rest: take the
		// prompt back and fail, rather than deliver part of the workflow.
		c.cancel()
		return c.rejected(ctx, nil, nodeErrs, "comfyui would run only part of the workflow")
	}
	return nil
}

// known answers whether ComfyUI has the run's prompt in its queue or
// history.
func (c *comfyRun) known(ctx context.Context) (bool, error) {
	in, err := c.inQueue(ctx)
	if err != nil || in {
		return in, err
	}
	_, found, err := c.history(ctx)
	return found, err
}

// rejected builds the permanent failure of a refused workflow, naming
// each node's errors and, for a value not in a list (a missing model),
// the values ComfyUI's /object_info offers.
func (c *comfyRun) rejected(ctx context.Context, top json.RawMessage, nodeErrs comfyNodeErrors, msg string) error {
	var e struct {
		Message string `json:"message"`
		Details string `json:"details"`
	}
	if json.Unmarshal(top, &e) == nil && e.Message != "" {
		msg += ": " + e.Message
		if e.Details != "" {
			msg += " (" + e.Details + ")"
		}
	} else if s := ""; json.Unmarshal(top, &s) == nil && s != "" {
		msg += ": " + s
	}
	code := CodeComfyUIValidation
	for _, id := range sortedNodeIDs(keysOf(nodeErrs)) {
		ne := nodeErrs[id]
		for _, ee := range ne.Errors {
			msg += fmt.Sprintf("; node %s (%s): %s", id, ne.ClassType, ee.Message)
			if ee.Details != "" {
				msg += ": " + ee.Details
			}
			if ee.Type != "value_not_in_list" || ee.ExtraInfo.InputName == "" {
				continue
			}
			var got string
			_ = json.Unmarshal(ee.ExtraInfo.ReceivedValue, &got)
			if looksLikeModel(got) {
				code = CodeComfyUIMissingModel
			}
			if opts := c.r.inputOptions(ctx, ne.ClassType, ee.ExtraInfo.InputName); opts != nil {
				msg += fmt.Sprintf(" (this machine has %s: %s)", ee.ExtraInfo.InputName, strings.Join(opts, ", "))
			}
		}
	}
	return Permanent(code, "%s", msg)
}

func looksLikeModel(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".safetensors", ".ckpt", ".pt", ".pth", ".bin", ".gguf", ".sft", ".onnx":
		return true
	}
	return false
}

// inputOptions answers the values /object_info/{class} lists for an input
// of a combo type (nil when unknown).
func (r ComfyUIRunner) inputOptions(ctx context.Context, class, input string) []string {
	var info map[string]struct {
		Input map[string]map[string][]json.RawMessage `json:"input"`
	}
	if status, err := r.getJSON(ctx, "/object_info/"+url.PathEscape(class), &info); err != nil || status != http.StatusOK {
		return nil
	}
	for _, group := range info[class].Input {
		spec, ok := group[input]
		if !ok || len(spec) == 0 {
			continue
		}
		var opts []string
		if json.Unmarshal(spec[0], &opts) == nil {
			return opts
		}
	}
	return nil
}

// outputNodes answers the workflow's nodes whose class /object_info marks
// as an output node (nil when ComfyUI does not say).
func (c *comfyRun) outputNodes(ctx context.Context) []string {
	classes := map[string]bool{}
	for _, n := range c.nodes {
		classes[n.ClassType] = true
	}
	isOutput := map[string]bool{}
	for class := range classes {
		var info map[string]struct {
			OutputNode *bool `json:"output_node"`
		}
		status, err := c.r.getJSON(ctx, "/object_info/"+url.PathEscape(class), &info)
		if err != nil || status != http.StatusOK {
			return nil
		}
		if i, ok := info[class]; ok && i.OutputNode != nil && *i.OutputNode {
			isOutput[class] = true
		}
	}
	var out []string
	for id, n := range c.nodes {
		if isOutput[n.ClassType] {
			out = append(out, id)
		}
	}
	return sortedNodeIDs(out)
}

type comfyHistory struct {
	// Prompt is the queue item: [number, prompt_id, prompt, extra_data,
	// outputs_to_execute, …].
	Prompt  []json.RawMessage                     `json:"prompt"`
	Outputs map[string]map[string]json.RawMessage `json:"outputs"`
	Status  *struct {
		StatusStr string            `json:"status_str"`
		Completed bool              `json:"completed"`
		Messages  []json.RawMessage `json:"messages"`
	} `json:"status"`
}

// history reads /history/{id}: the entry, whether ComfyUI has one.
func (c *comfyRun) history(ctx context.Context) (comfyHistory, bool, error) {
	var hist map[string]comfyHistory
	status, err := c.r.getJSON(ctx, "/history/"+url.PathEscape(c.id), &hist)
	if err != nil {
		return comfyHistory{}, false, err
	}
	if status != http.StatusOK {
		return comfyHistory{}, false, Retryable(CodeComfyUIError, "comfyui /history answered %d", status)
	}
	h, ok := hist[c.id]
	if ok && c.number != "" && len(h.Prompt) > 0 && string(h.Prompt[0]) != string(c.number) {
		// An earlier prompt's entry under this id (ComfyUI accepts a
		// prompt id twice and keeps the old entry until the new run
		// ends): not this run's outcome.
		return comfyHistory{}, false, nil
	}
	return h, ok, nil
}

// inQueue answers whether the prompt is running or waiting in ComfyUI.
func (c *comfyRun) inQueue(ctx context.Context) (bool, error) {
	running, pending, err := c.r.queueIDs(ctx)
	if err != nil {
		return false, err
	}
	return running[c.id] || pending[c.id], nil
}

// queueIDs reads GET /queue: items are [number, prompt_id, prompt,
// extra_data, outputs_to_execute, ...].
func (r ComfyUIRunner) queueIDs(ctx context.Context) (running, pending map[string]bool, err error) {
	var q struct {
		Running [][]json.RawMessage `json:"queue_running"`
		Pending [][]json.RawMessage `json:"queue_pending"`
	}
	status, err := r.getJSON(ctx, "/queue", &q)
	if err != nil {
		return nil, nil, err
	}
	if status != http.StatusOK {
		return nil, nil, Retryable(CodeComfyUIError, "comfyui /queue answered %d", status)
	}
	ids := func(items [][]json.RawMessage) map[string]bool {
		m := map[string]bool{}
		for _, it := range items {
			var id string
			if len(it) > 1 && json.Unmarshal(it[1], &id) == nil {
				m[id] = true
			}
		}
		return m
	}
	return ids(q.Running), ids(q.Pending), nil
}

// follow waits until the prompt has its history entry, reporting progress
// from the websocket's events. A prompt that is neither in the history nor
// in the queue twice in a row is lost (ComfyUI restarted).
func (c *comfyRun) follow(ctx context.Context, events <-chan comfyEvent) (comfyHistory, error) {
	missing := 0
	for {
		var h comfyHistory
		var found bool
		err := c.retry(ctx, "follow prompt", func() error {
			var err error
			h, found, err = c.history(ctx)
			if err != nil || found {
				return err
			}
			in, err := c.inQueue(ctx)
			if err != nil {
				return err
			}
			if in {
				missing = 0
			} else {
				missing++
			}
			return nil
		})
		if err != nil {
			return comfyHistory{}, err
		}
		if found && (h.Status == nil || h.Status.Completed || h.Status.StatusStr == "success" || h.Status.StatusStr == "error") {
			// An entry without status is an older ComfyUI's finished
			// prompt. The socket's last messages (the last nodes, the
			// end) may still be on their way: the log waits for them,
			// one poll interval at most.
			c.awaitEnd(ctx, events)
			return h, nil
		}
		if !found && missing >= 2 {
			return comfyHistory{}, Retryable(CodeComfyUIPromptLost, "comfyui lost prompt %s: it is neither queued nor in the history (did ComfyUI restart?)", c.id)
		}
		wait := c.clk.NewTimer(c.r.pollEvery())
	waiting:
		for {
			select {
			case <-ctx.Done():
				wait.Stop()
				return comfyHistory{}, ctx.Err()
			case <-wait.Chan():
				break waiting
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				if c.onEvent(ev) {
					wait.Stop()
					break waiting
				}
			}
		}
	}
}

// awaitEnd reads the websocket until it says the prompt ended, for one
// poll interval at most.
func (c *comfyRun) awaitEnd(ctx context.Context, events <-chan comfyEvent) {
	if events == nil || c.ended {
		return
	}
	wait := c.clk.NewTimer(c.r.pollEvery())
	defer wait.Stop()
	for !c.ended {
		select {
		case <-ctx.Done():
			return
		case <-wait.Chan():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			c.onEvent(ev)
		}
	}
}

// comfyEvent is one JSON message of ComfyUI's websocket.
type comfyEvent struct {
	Type string `json:"type"`
	Data struct {
		PromptID *string  `json:"prompt_id"`
		Node     *string  `json:"node"`
		Nodes    []string `json:"nodes"`
		Value    float64  `json:"value"`
		Max      float64  `json:"max"`
	} `json:"data"`
}

// onEvent updates the progress from an event and answers whether the
// prompt ended (its history should be read now).
func (c *comfyRun) onEvent(ev comfyEvent) bool {
	if ev.Data.PromptID != nil && *ev.Data.PromptID != c.id {
		return false
	}
	total := float64(max(len(c.nodes), 1))
	step := 0.0
	now := c.clk.Now()
	switch ev.Type {
	case "execution_start":
		c.log.printf("prompt started")
	case "execution_cached":
		for _, n := range ev.Data.Nodes {
			c.done[n] = true
			c.log.printf("%s cached", c.log.node(n))
		}
	case "executing":
		if c.current != "" {
			c.done[c.current] = true
			c.log.printf("%s finished in %s", c.log.node(c.current), seconds(now.Sub(c.currentAt)))
			c.current = ""
		}
		if ev.Data.Node == nil {
			c.ended = true
			return true // the prompt ended
		}
		c.current, c.currentAt = *ev.Data.Node, now
		c.log.printf("%s started", c.log.node(c.current))
	case "progress":
		if ev.Data.Max > 0 {
			step = min(ev.Data.Value/ev.Data.Max, 1)
		}
	case "executed":
		if ev.Data.Node != nil {
			c.done[*ev.Data.Node] = true
		}
	case "execution_error", "execution_interrupted":
		if c.current != "" {
			// The history's messages say which node and why (judge).
			c.failedNode, c.failedIn, c.current = c.current, now.Sub(c.currentAt), ""
		}
		c.ended = true
		return true
	case "execution_success":
		if c.current != "" {
			c.log.printf("%s finished in %s", c.log.node(c.current), seconds(now.Sub(c.currentAt)))
			c.current = ""
		}
		c.ended = true
		return true
	default:
		return false
	}
	p := min((float64(len(c.done))+step)/total, 0.99)
	if p > c.progress {
		c.progress = p
		if c.j.Progress != nil {
			c.j.Progress(p)
		}
	}
	return false
}

// watch follows ComfyUI's websocket for clientID until ctx ends; the
// channel closes when the socket does (the history polls go on).
func (r ComfyUIRunner) watch(ctx context.Context, clientID string) <-chan comfyEvent {
	ch := make(chan comfyEvent, 64)
	u := "ws" + strings.TrimPrefix(r.base(), "http") + "/ws?clientId=" + url.QueryEscape(clientID)
	// No client timeout: the socket lives as long as the job.
	hc := &http.Client{Transport: r.http().Transport}
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		close(ch)
		return ch
	}
	conn.SetReadLimit(64 << 20) // binary preview frames can be large
	// ComfyUI registers the socket before its first message ("status"):
	// once that arrived, the prompt's events will reach it.
	first, stop := context.WithTimeout(ctx, 10*time.Second)
	_, _, err = conn.Read(first)
	stop()
	if err != nil {
		conn.CloseNow()
		close(ch)
		return ch
	}
	go func() {
		defer close(ch)
		defer conn.CloseNow()
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if typ != websocket.MessageText {
				continue // previews
			}
			var ev comfyEvent
			if json.Unmarshal(data, &ev) != nil {
				continue
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// judge turns a finished prompt's history into its output files or the
// failure it is: an execution error (out of memory retryable, others
// permanent), an interruption fleetq did not ask for (retryable), an
// output node that produced nothing, or no output file at all.
func (c *comfyRun) judge(ctx context.Context, h comfyHistory) (map[string][]comfyFile, error) {
	if h.Status != nil {
		for _, m := range h.Status.Messages {
			var pair []json.RawMessage
			if json.Unmarshal(m, &pair) != nil || len(pair) != 2 {
				continue
			}
			var kind string
			_ = json.Unmarshal(pair[0], &kind)
			var e struct {
				NodeID    string   `json:"node_id"`
				NodeType  string   `json:"node_type"`
				Exception string   `json:"exception_message"`
				Type      string   `json:"exception_type"`
				Traceback []string `json:"traceback"`
			}
			_ = json.Unmarshal(pair[1], &e)
			switch kind {
			case "execution_error":
				ran := time.Duration(0)
				if e.NodeID == c.failedNode {
					ran = c.failedIn
				}
				c.log.failure(e.NodeID, e.NodeType, ran, e.Type, e.Exception, e.Traceback)
				where := fmt.Sprintf("node %s (%s): %s", e.NodeID, e.NodeType, strings.TrimSpace(e.Exception))
				if isOOM(e.Type, e.Exception) {
					return nil, Retryable(CodeComfyUIOOM, "comfyui ran out of GPU memory: %s", where)
				}
				return nil, Permanent(CodeComfyUIExecution, "comfyui failed to execute the workflow: %s", where)
			case "execution_interrupted":
				// This run's own prompt (its id is this lease's, and the
				// entry carries its queue number), and fleetq interrupts
				// only a prompt it has stopped following: someone else
				// interrupted it.
				c.log.printf("node %s (%s) interrupted: not by fleetq (another client's /interrupt, or ComfyUI's own)", e.NodeID, e.NodeType)
				return nil, Retryable(CodeComfyUIInterrupted, "comfyui interrupted the prompt at node %s (%s); fleetq did not ask for it", e.NodeID, e.NodeType)
			}
		}
		if h.Status.StatusStr == "error" {
			c.log.printf("comfyui recorded an error without a message (see the ComfyUI server's own log)")
			return nil, Permanent(CodeComfyUIExecution, "comfyui failed to execute the workflow (no error message in its history; see the ComfyUI log)")
		}
	}
	var missing []string
	for _, id := range c.outputNodes(ctx) {
		if _, ok := h.Outputs[id]; !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", id, c.nodes[id].ClassType))
		}
	}
	if len(missing) > 0 {
		err := Permanent(CodeComfyUIMissingOutputs, "comfyui finished but output nodes produced nothing: %s", strings.Join(missing, ", "))
		c.log.printf("%v", err)
		return nil, err
	}
	files := map[string][]comfyFile{}
	n := 0
	for node, kinds := range h.Outputs {
		for _, kind := range sortedRawKeys(kinds) {
			var fs []comfyFile
			if json.Unmarshal(kinds[kind], &fs) != nil {
				continue
			}
			for _, f := range fs {
				if f.Filename != "" && f.Type == "output" {
					files[node] = append(files[node], f)
					n++
				}
			}
		}
	}
	if n == 0 {
		err := Permanent(CodeComfyUINoOutputs, "comfyui finished but saved no output file (a workflow needs a save node, such as SaveImage)")
		c.log.printf("%v", err)
		return nil, err
	}
	return files, nil
}

func isOOM(typ, msg string) bool {
	return strings.Contains(typ, "OutOfMemory") || strings.Contains(strings.ToLower(msg), "out of memory") ||
		strings.Contains(msg, "Allocation on device")
}

// deliver fetches the outputs with /view and PUTs them to the job's URLs:
// files in numeric node order, the first to output_url, the rest to the
// named output_urls in name order. A job with output URLs gets every file
// or a clear failure.
func (c *comfyRun) deliver(ctx context.Context, outputs map[string][]comfyFile) (json.RawMessage, error) {
	type file struct {
		comfyFile
		node string
	}
	var ordered []file
	for _, n := range sortedNodeIDs(keysOf(outputs)) {
		for _, f := range outputs[n] {
			ordered = append(ordered, file{f, n})
		}
	}
	main, named := c.j.Outputs()
	// targets and names: the URLs in delivery order, and how the log
	// names each (never the URL: it is presigned).
	var targets, names []string
	if main != "" {
		targets, names = append(targets, main), append(names, "output_url")
	}
	for _, name := range sortedKeys(named) {
		targets, names = append(targets, named[name]), append(names, "output_urls["+name+"]")
	}
	if len(targets) > 0 && len(ordered) > len(targets) {
		err := Permanent(CodeComfyUITooManyOutputs, "comfyui saved %d files but the job has %d output URLs; name one output per extra file in input.outputs", len(ordered), len(targets))
		c.log.printf("%v", err)
		return nil, err
	}
	for i, f := range ordered {
		if i >= len(targets) {
			c.log.printf("output %s of %s kept on ComfyUI only (the job has no output URL for it)", f.Filename, c.log.node(f.node))
			continue
		}
		if err := c.r.copyOut(ctx, c.j.HTTP, f.comfyFile, targets[i]); err != nil {
			c.log.printf("output %s of %s not delivered: %v", f.Filename, c.log.node(f.node), err)
			return nil, err
		}
		c.log.printf("output %s of %s delivered to %s", f.Filename, c.log.node(f.node), names[i])
	}
	return json.Marshal(map[string]any{"prompt_id": c.id, "outputs": outputs, "uploaded": min(len(ordered), len(targets))})
}

func (r ComfyUIRunner) copyOut(ctx context.Context, hc *http.Client, f comfyFile, target string) error {
	q := url.Values{"filename": {f.Filename}, "subfolder": {f.Subfolder}, "type": {f.Type}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base()+"/view?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	res, err := r.http().Do(req)
	if err != nil {
		return Retryable(CodeComfyUIUnreachable, "fetch output %s: %v", f.Filename, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return Retryable(CodeComfyUIError, "comfyui /view %s answered %s", f.Filename, res.Status)
	}
	tmp, err := os.CreateTemp("", "fleetq-out-*"+filepath.Ext(f.Filename))
	if err != nil {
		return Retryable(CodeWorkdir, "%v", err)
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, res.Body)
	tmp.Close()
	if err != nil {
		return Retryable(CodeComfyUIError, "fetch output %s: %v", f.Filename, err)
	}
	if err := upload(ctx, hc, target, tmp.Name()); err != nil {
		return Retryable(CodeOutputUpload, "upload output %s: %v", f.Filename, err)
	}
	return nil
}

// cancel takes the run's prompt back (best effort): deleted from the queue
// if it waits there, interrupted if it is the one running — never another
// prompt.
func (c *comfyRun) cancel() {
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	_, _ = c.r.call(ctx, http.MethodPost, "/queue", map[string]any{"delete": []string{c.id}}, nil)
	running, _, err := c.r.queueIDs(ctx)
	if err == nil && running[c.id] {
		_, _ = c.r.call(ctx, http.MethodPost, "/interrupt", map[string]any{"prompt_id": c.id}, nil)
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// sortedNodeIDs sorts ComfyUI node ids numerically ("9" before "10"; a
// subgraph's "10:2" after "10"), other ids after, as strings.
func sortedNodeIDs(ids []string) []string {
	sort.Slice(ids, func(i, j int) bool { return nodeIDLess(ids[i], ids[j]) })
	return ids
}

func nodeIDLess(a, b string) bool {
	pa, pb := strings.Split(a, ":"), strings.Split(b, ":")
	for k := 0; k < len(pa) && k < len(pb); k++ {
		na, ea := strconv.Atoi(pa[k])
		nb, eb := strconv.Atoi(pb[k])
		switch {
		case ea == nil && eb == nil && na != nb:
			return na < nb
		case ea == nil && eb != nil:
			return true
		case ea != nil && eb == nil:
			return false
		case ea != nil && eb != nil && pa[k] != pb[k]:
			return pa[k] < pb[k]
		}
	}
	return len(pa) < len(pb)
}

func sortedRawKeys(m map[string]json.RawMessage) []string {
	out := keysOf(m)
	sort.Strings(out)
	return out
}
