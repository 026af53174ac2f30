package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// comfyServer is a contract fake of ComfyUI's server: its routes and JSON
// shapes follow ComfyUI's server.py and execution.py (docs/worker.md names
// the version they were read from). A prompt moves pending → running →
// finished one step per /history or /queue read, so tests are paced by the
// runner's own polls; a held prompt stays running until finish is called.
// Like ComfyUI, it queues a prompt id it has run before and keeps that
// run's history entry until the new run ends.
type comfyServer struct {
	t  *testing.T
	mu sync.Mutex

	models     []string       // ckpt_name values CheckpointLoaderSimple accepts
	cached     []string       // node ids reported as cached (execution_cached)
	outcome    string         // how the next prompts end (see execute)
	oldBuild   bool           // ignores a client's prompt_id; history without status
	hold       bool           // a running prompt waits for finish
	refuse     int            // the next N /history or /queue reads lose their connection
	dropPost   int            // the next N accepted POST /prompt lose their answer
	posted     chan string    // receives each queued prompt id (when set)
	number     int            // next queue number
	pending    []*comfyPrompt // queue_pending
	running    *comfyPrompt   // queue_running
	history    map[string]*comfyPrompt
	released   map[string]bool
	sockets    map[string]*websocket.Conn
	uploads    map[string]string
	posts      []map[string]json.RawMessage // bodies of POST /prompt
	deleted    []string                     // POST /queue delete ids
	interrupts []string                     // POST /interrupt prompt ids ("" for a global one)
}

type comfyPrompt struct {
	number      int
	id          string
	prompt      map[string]comfyTestNode
	extra       map[string]any
	outputs     []string // outputs_to_execute
	steps       int
	interrupted bool
	result      map[string]any // the history entry once finished
}

type comfyTestNode struct {
	ClassType string         `json:"class_type"`
	Inputs    map[string]any `json:"inputs"`
}

// nodeClasses is the subset of ComfyUI's node classes the tests use, with
// their OUTPUT_NODE flag.
var nodeClasses = map[string]bool{
	"CheckpointLoaderSimple": false, "LoadImage": false, "KSampler": false, "VAEDecode": false,
	"SaveImage": true, "PreviewImage": true, "SaveAnimatedWEBP": true,
}

func newComfyServer(t *testing.T) (*comfyServer, *httptest.Server) {
	c := &comfyServer{t: t, models: []string{"sdxl.safetensors", "flux1-dev.safetensors"}, outcome: "success",
		history: map[string]*comfyPrompt{}, released: map[string]bool{}, sockets: map[string]*websocket.Conn{}, uploads: map[string]string{}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv
}

func (c *comfyServer) set(f func(c *comfyServer)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (c *comfyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/api") // ComfyUI serves every route under /api too
	if path == "/ws" {
		c.websocket(w, r)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if (path == "/queue" && r.Method == http.MethodGet || strings.HasPrefix(path, "/history/")) && c.refuse > 0 {
		c.refuse--
		if hj, ok := w.(http.Hijacker); ok {
			conn, _, _ := hj.Hijack()
			conn.Close()
			return
		}
	}
	switch {
	case path == "/system_stats":
		writeJSON(w, 200, map[string]any{
			"system":  map[string]any{"os": "posix", "ram_total": 67108864000, "ram_free": 60000000000, "comfyui_version": "0.3.66", "python_version": "3.12.3", "pytorch_version": "2.8.0+cu128", "embedded_python": false, "argv": []string{"main.py"}},
			"devices": []map[string]any{{"name": "cuda:0 NVIDIA A10G : cudaMallocAsync", "type": "cuda", "index": 0, "vram_total": 23827447808, "vram_free": 23000000000, "torch_vram_total": 0, "torch_vram_free": 0}},
		})
	case path == "/upload/image" && r.Method == http.MethodPost:
		file, hdr, err := r.FormFile("image")
		if err != nil {
			w.WriteHeader(400)
			return
		}
		data, _ := io.ReadAll(file)
		c.uploads[hdr.Filename] = string(data)
		writeJSON(w, 200, map[string]any{"name": hdr.Filename, "subfolder": "", "type": "input"})
	case path == "/prompt" && r.Method == http.MethodPost:
		c.postPrompt(w, r)
	case path == "/queue" && r.Method == http.MethodGet:
		c.step()
		item := func(p *comfyPrompt) []any { return []any{p.number, p.id, p.prompt, p.extra, p.outputs} }
		running, pending := []any{}, []any{}
		if c.running != nil {
			running = append(running, item(c.running))
		}
		for _, p := range c.pending {
			pending = append(pending, item(p))
		}
		writeJSON(w, 200, map[string]any{"queue_running": running, "queue_pending": pending})
	case path == "/queue" && r.Method == http.MethodPost:
		var body struct {
			Clear  bool     `json:"clear"`
			Delete []string `json:"delete"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		for _, id := range body.Delete {
			c.deleted = append(c.deleted, id)
			for i, p := range c.pending {
				if p.id == id {
					c.pending = append(c.pending[:i], c.pending[i+1:]...)
					break
				}
			}
		}
		w.WriteHeader(200)
	case path == "/interrupt" && r.Method == http.MethodPost:
		var body struct {
			PromptID string `json:"prompt_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		c.interrupts = append(c.interrupts, body.PromptID)
		if c.running != nil && (body.PromptID == "" || body.PromptID == c.running.id) {
			c.running.interrupted = true
		}
		w.WriteHeader(200)
	case strings.HasPrefix(path, "/history/"):
		c.step()
		id := strings.TrimPrefix(path, "/history/")
		out := map[string]any{}
		if p, ok := c.history[id]; ok {
			out[id] = p.result
		}
		writeJSON(w, 200, out)
	case strings.HasPrefix(path, "/object_info/"):
		class := strings.TrimPrefix(path, "/object_info/")
		out := map[string]any{}
		if isOut, ok := nodeClasses[class]; ok {
			inputs := map[string]any{}
			if class == "CheckpointLoaderSimple" {
				inputs["ckpt_name"] = []any{c.models, map[string]any{"tooltip": "The name of the checkpoint (model) to load."}}
			}
			out[class] = map[string]any{"input": map[string]any{"required": inputs}, "input_order": map[string]any{"required": keys(inputs)},
				"output": []string{}, "output_is_list": []bool{}, "output_name": []string{}, "name": class, "display_name": class,
				"description": "", "python_module": "nodes", "category": "test", "output_node": isOut}
		}
		writeJSON(w, 200, out)
	case path == "/view":
		q := r.URL.Query()
		if q.Get("type") != "output" || q.Get("filename") == "" {
			w.WriteHeader(404)
			return
		}
		_, _ = io.WriteString(w, "bytes of "+q.Get("filename"))
	default:
		w.WriteHeader(404)
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// postPrompt validates like execution.validate_prompt: an output whose
// inputs name a missing model fails; when every output fails the answer is
// 400, when some do it is 200 with their node_errors and the rest runs.
func (c *comfyServer) postPrompt(w http.ResponseWriter, r *http.Request) {
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, 400, map[string]any{"error": map[string]any{"type": "invalid_prompt", "message": "bad json", "details": "", "extra_info": map[string]any{}}, "node_errors": []any{}})
		return
	}
	c.posts = append(c.posts, body)
	var prompt map[string]comfyTestNode
	if err := json.Unmarshal(body["prompt"], &prompt); err != nil || prompt == nil {
		writeJSON(w, 400, map[string]any{"error": map[string]any{"type": "no_prompt", "message": "No prompt provided", "details": "No prompt provided", "extra_info": map[string]any{}}, "node_errors": []any{}})
		return
	}
	nodeErrors := map[string]any{}
	var good []string
	for id, n := range prompt {
		if !nodeClasses[n.ClassType] {
			continue
		}
		if bad, name := c.badModel(prompt, id); bad != "" {
			nodeErrors[bad] = map[string]any{"errors": []any{map[string]any{"type": "value_not_in_list", "message": "Value not in list",
				"details":    fmt.Sprintf("ckpt_name: '%s' not in %s", name, pyList(c.models)),
				"extra_info": map[string]any{"input_name": "ckpt_name", "input_config": []any{c.models, map[string]any{}}, "received_value": name}}},
				"dependent_outputs": []string{id}, "class_type": prompt[bad].ClassType}
			continue
		}
		good = append(good, id)
	}
	if len(good) == 0 {
		writeJSON(w, 400, map[string]any{"error": map[string]any{"type": "prompt_outputs_failed_validation", "message": "Prompt outputs failed validation", "details": "", "extra_info": map[string]any{}}, "node_errors": nodeErrors})
		return
	}
	id := uuid.NewString()
	if raw, ok := body["prompt_id"]; ok && !c.oldBuild {
		_ = json.Unmarshal(raw, &id)
	}
	extra := map[string]any{}
	_ = json.Unmarshal(body["extra_data"], &extra)
	if raw, ok := body["client_id"]; ok {
		var cid string
		_ = json.Unmarshal(raw, &cid)
		extra["client_id"] = cid
	}
	c.number++
	c.pending = append(c.pending, &comfyPrompt{number: c.number, id: id, prompt: prompt, extra: extra, outputs: good})
	if c.posted != nil {
		c.posted <- id
	}
	if c.dropPost > 0 {
		c.dropPost--
		if hj, ok := w.(http.Hijacker); ok {
			conn, _, _ := hj.Hijack()
			conn.Close()
			return
		}
	}
	writeJSON(w, 200, map[string]any{"prompt_id": id, "number": c.number, "node_errors": nodeErrors})
}

func pyList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = "'" + v + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// badModel walks an output's inputs for a checkpoint loader naming a
// model this server lacks.
func (c *comfyServer) badModel(prompt map[string]comfyTestNode, id string) (string, string) {
	n := prompt[id]
	if n.ClassType == "CheckpointLoaderSimple" {
		name, _ := n.Inputs["ckpt_name"].(string)
		for _, m := range c.models {
			if m == name {
				return "", ""
			}
		}
		return id, name
	}
	for _, v := range n.Inputs {
		if link, ok := v.([]any); ok && len(link) == 2 {
			if from, ok := link[0].(string); ok {
				if bad, name := c.badModel(prompt, from); bad != "" {
					return bad, name
				}
			}
		}
	}
	return "", ""
}

// finish lets a held running prompt end.
func (c *comfyServer) finish(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released[id] = true
}

func (c *comfyServer) send(p *comfyPrompt, typ string, data map[string]any) {
	cid, _ := p.extra["client_id"].(string)
	conn := c.sockets[cid]
	if conn == nil {
		return
	}
	msg, _ := json.Marshal(map[string]any{"type": typ, "data": data})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	_ = conn.Write(ctx, websocket.MessageText, msg)
}

// step advances the queue one step: the first pending prompt starts
// (execution_start, executing, progress), a running one finishes.
func (c *comfyServer) step() {
	if p := c.running; p != nil {
		if c.outcome == "lost" {
			c.running, c.pending = nil, nil // ComfyUI restarted: queue and history are gone
			return
		}
		if c.hold && !c.released[p.id] && !p.interrupted {
			return
		}
		c.execute(p)
		c.running = nil
		return
	}
	if len(c.pending) == 0 {
		return
	}
	p := c.pending[0]
	c.pending = c.pending[1:]
	c.running = p
	ts := time.Now().UnixMilli()
	c.send(p, "execution_start", map[string]any{"prompt_id": p.id, "timestamp": ts})
	c.send(p, "execution_cached", map[string]any{"nodes": c.cachedOf(p), "prompt_id": p.id, "timestamp": ts})
	first := c.order(p)[0]
	c.send(p, "executing", map[string]any{"node": first, "display_node": first, "prompt_id": p.id})
	c.send(p, "progress", map[string]any{"value": 10, "max": 20, "prompt_id": p.id, "node": first})
}

// cachedOf is the prompt's nodes the server reports as cached: those of
// the cached list that the prompt has.
func (c *comfyServer) cachedOf(p *comfyPrompt) []string {
	out := []string{}
	for _, id := range c.cached {
		if _, ok := p.prompt[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

// order is the order the server executes a prompt's uncached nodes in
// (by id, as strings: the tests need some fixed order, not ComfyUI's).
func (c *comfyServer) order(p *comfyPrompt) []string {
	cached := map[string]bool{}
	for _, id := range c.cachedOf(p) {
		cached[id] = true
	}
	ids := make([]string, 0, len(p.prompt))
	for id := range p.prompt {
		if !cached[id] {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// execute ends a running prompt as the outcome says and writes its history
// entry the way PromptQueue.task_done does.
func (c *comfyServer) execute(p *comfyPrompt) {
	ts := time.Now().UnixMilli()
	msgs := []any{[]any{"execution_start", map[string]any{"prompt_id": p.id, "timestamp": ts}},
		[]any{"execution_cached", map[string]any{"nodes": []string{}, "prompt_id": p.id, "timestamp": ts}}}
	outputs := map[string]any{}
	file := 0
	for _, id := range p.outputs {
		n := p.prompt[id]
		prefix, _ := n.Inputs["filename_prefix"].(string)
		if prefix == "" {
			prefix = "ComfyUI"
		}
		count := 1
		if f, ok := n.Inputs["batch"].(float64); ok {
			count = int(f)
		}
		var files []any
		for i := 0; i < count; i++ {
			file++
			typ := "output"
			if n.ClassType == "PreviewImage" {
				typ = "temp"
			}
			files = append(files, map[string]any{"filename": fmt.Sprintf("%s_%05d_.png", prefix, file), "subfolder": "", "type": typ})
		}
		kind := "images"
		if n.ClassType == "SaveAnimatedWEBP" {
			outputs[id] = map[string]any{"images": files, "animated": []bool{true}}
			continue
		}
		outputs[id] = map[string]any{kind: files}
	}
	statusStr, completed := "success", true
	errMsg := func(exType, exMsg string) []any {
		return []any{"execution_error", map[string]any{"prompt_id": p.id, "node_id": "3", "node_type": "KSampler", "executed": []string{"4"},
			"exception_message": exMsg, "exception_type": exType, "traceback": []string{"  File \"execution.py\", line 1\n"},
			"current_inputs": map[string]any{}, "current_outputs": map[string]any{}, "timestamp": ts}}
	}
	outcome := c.outcome
	if p.interrupted {
		outcome = "interrupted"
	}
	switch outcome {
	case "success":
		msgs = append(msgs, []any{"execution_success", map[string]any{"prompt_id": p.id, "timestamp": ts}})
	case "error":
		statusStr, completed, outputs = "error", false, map[string]any{}
		msgs = append(msgs, errMsg("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (1x768 and 1024x320)"))
	case "oom":
		statusStr, completed, outputs = "error", false, map[string]any{}
		msgs = append(msgs, errMsg("torch.OutOfMemoryError", "Allocation on device "))
	case "error_in_success":
		// A dependency cycle found at run time ends execution without
		// clearing success (execution.py's execute_async).
		outputs = map[string]any{}
		msgs = append(msgs, errMsg("DependencyCycleError", "Dependency cycle detected"))
	case "interrupted":
		statusStr, completed, outputs = "error", false, map[string]any{}
		msgs = append(msgs, []any{"execution_interrupted", map[string]any{"prompt_id": p.id, "node_id": "3", "node_type": "KSampler", "executed": []string{"4"}, "timestamp": ts}})
	case "drop_output":
		// An output node that ran but left nothing in the history.
		last := ""
		for id := range outputs {
			if last == "" || len(id) > len(last) || len(id) == len(last) && id > last {
				last = id
			}
		}
		delete(outputs, last)
		msgs = append(msgs, []any{"execution_success", map[string]any{"prompt_id": p.id, "timestamp": ts}})
	}
	entry := map[string]any{"prompt": []any{p.number, p.id, p.prompt, p.extra, p.outputs}, "outputs": outputs,
		"meta": map[string]any{}}
	if !c.oldBuild {
		entry["status"] = map[string]any{"status_str": statusStr, "completed": completed, "messages": msgs}
	}
	p.result = entry
	c.history[p.id] = p
	// The socket hears what execution.py sends as it goes: each further
	// node as it starts, an output node's files once it ran, then the end
	// (the first node's executing went out when the prompt started).
	last := msgs[len(msgs)-1].([]any)
	switch last[0] {
	case "execution_error", "execution_interrupted":
		c.send(p, last[0].(string), last[1].(map[string]any))
		return
	}
	for _, id := range c.order(p)[1:] {
		c.send(p, "executing", map[string]any{"node": id, "display_node": id, "prompt_id": p.id})
		if o, ok := outputs[id]; ok {
			c.send(p, "executed", map[string]any{"node": id, "display_node": id, "output": o, "prompt_id": p.id})
		}
	}
	if first := c.order(p)[0]; outputs[first] != nil {
		c.send(p, "executed", map[string]any{"node": first, "display_node": first, "output": outputs[first], "prompt_id": p.id})
	}
	c.send(p, "executing", map[string]any{"node": nil, "prompt_id": p.id})
	c.send(p, "execution_success", map[string]any{"prompt_id": p.id, "timestamp": ts})
}

// websocket is /ws?clientId=: a status message first, then the events of
// this client's prompts.
func (c *comfyServer) websocket(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	sid := r.URL.Query().Get("clientId")
	if sid == "" {
		sid = strings.ReplaceAll(uuid.NewString(), "-", "")
	}
	c.mu.Lock()
	c.sockets[sid] = conn
	msg, _ := json.Marshal(map[string]any{"type": "status", "data": map[string]any{"status": map[string]any{"exec_info": map[string]any{"queue_remaining": len(c.pending)}}, "sid": sid}})
	_ = conn.Write(r.Context(), websocket.MessageText, msg)
	c.mu.Unlock()
	for {
		if _, _, err := conn.Read(r.Context()); err != nil {
			break
		}
	}
	c.mu.Lock()
	delete(c.sockets, sid)
	c.mu.Unlock()
}

func (c *comfyServer) snapshot() (posts int, deleted, interrupts []string, pending int, running bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.posts), append([]string(nil), c.deleted...), append([]string(nil), c.interrupts...), len(c.pending), c.running != nil
}
