package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/service/agent"
)

// blobs is a stand-in for presigned S3 URLs: GET serves, PUT stores.
type blobs struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func newBlobs(t *testing.T) (*blobs, *httptest.Server) {
	b := &blobs{objs: map[string][]byte{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch r.Method {
		case http.MethodPut:
			data, _ := io.ReadAll(r.Body)
			b.objs[r.URL.Path] = data
		case http.MethodGet:
			data, ok := b.objs[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(data)
		}
	}))
	t.Cleanup(srv.Close)
	return b, srv
}

func (b *blobs) get(path string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.objs[path])
}

func runExec(t *testing.T, cmd string, j *agent.Job) (json.RawMessage, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return agent.ExecRunner{Command: cmd}.Run(ctx, j)
}

func TestExecRunner(t *testing.T) {
	store, srv := newBlobs(t)
	store.objs["/in/scene.obj"] = []byte("v 0 0 0")
	job := &agent.Job{Lease: agent.Lease{JobID: "j1", TenantID: "t", Input: json.RawMessage(`{"frames": 3}`),
		InputURLs: map[string]string{"scene": srv.URL + "/in/scene.obj"}, OutputURL: srv.URL + "/out/output",
		OutputURLs: map[string]string{"preview": srv.URL + "/out/preview"}}}

	// Success: reads the job on stdin and its input, writes outputs, the
	// last stdout line is the result.
	res, err := runExec(t, `job=$(cat); echo "working"; cat "$FLEETQ_INPUT_DIR/scene" > "$FLEETQ_OUTPUT_DIR/output"; `+
		`echo "png" > "$FLEETQ_OUTPUT_DIR/preview"; echo "$job" | grep -q '"frames":3' && echo '{"frames_done":3}'`, job)
	if err != nil || string(res) != `{"frames_done":3}` {
		t.Fatalf("result %s, %v", res, err)
	}
	if got := store.get("/out/output"); got != "v 0 0 0" {
		t.Fatalf("output %q", got)
	}
	if got := store.get("/out/preview"); got != "png\n" {
		t.Fatalf("preview %q", got)
	}
	// Plain text as the last line is wrapped.
	res, err = runExec(t, `echo done`, &agent.Job{Lease: agent.Lease{JobID: "j2"}})
	if err != nil || string(res) != `{"output":"done"}` {
		t.Fatalf("plain result %s, %v", res, err)
	}

	for _, c := range []struct {
		cmd       string
		retryable bool
		code      string
		msg       string
	}{
		{`echo "scene is corrupt" >&2; exit 65`, false, "exit_65", "scene is corrupt"},
		{`echo "CUDA out of memory" >&2; exit 3`, true, "exit_3", "CUDA out of memory"},
	} {
		_, err := runExec(t, c.cmd, &agent.Job{Lease: agent.Lease{JobID: "j3"}})
		var je *agent.JobError
		if !errors.As(err, &je) || je.Retryable != c.retryable || je.Code != c.code || !strings.Contains(je.Message, c.msg) {
			t.Fatalf("%q: %+v", c.cmd, err)
		}
	}
	// An input that cannot be fetched is a retryable failure before the command runs.
	_, err = runExec(t, `touch /should-not-run`, &agent.Job{Lease: agent.Lease{JobID: "j4", InputURLs: map[string]string{"x": srv.URL + "/missing"}}})
	var je *agent.JobError
	if !errors.As(err, &je) || !je.Retryable || je.Code != "input_download" {
		t.Fatalf("missing input: %v", err)
	}
	// A stopped job kills the command: the job is stopped once the command
	// says it runs (opening the read end of a FIFO waits for its writer).
	started := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if f, err := os.Open(started); err == nil {
			_, _ = io.ReadAll(f)
			f.Close()
		}
		cancel()
	}()
	start := time.Now()
	if _, err := (agent.ExecRunner{Command: "echo up > " + started + "; sleep 30"}).Run(ctx, &agent.Job{Lease: agent.Lease{JobID: "j5"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("the command outlived its job")
	}
}

// fakeComfy follows ComfyUI's documented HTTP API: /system_stats,
// /upload/image (multipart "image"), /prompt (400 with node_errors for an
// invalid workflow), /history/{prompt_id} (empty until done), /view.
type fakeComfy struct {
	mu       sync.Mutex
	uploads  map[string]string
	polls    int
	failExec bool
}

func (f *fakeComfy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.URL.Path == "/system_stats":
		_, _ = w.Write([]byte(`{"system":{"os":"posix"},"devices":[{"name":"cuda:0","type":"cuda","vram_total":24000000000}]}`))
	case r.URL.Path == "/upload/image" && r.Method == http.MethodPost:
		file, hdr, err := r.FormFile("image")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		data, _ := io.ReadAll(file)
		f.uploads[hdr.Filename] = string(data)
		_, _ = fmt.Fprintf(w, `{"name":%q,"subfolder":"","type":"input"}`, hdr.Filename)
	case r.URL.Path == "/prompt" && r.Method == http.MethodPost:
		var body struct {
			Prompt map[string]struct {
				ClassType string         `json:"class_type"`
				Inputs    map[string]any `json:"inputs"`
			} `json:"prompt"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for id, n := range body.Prompt {
			if n.ClassType == "CheckpointLoaderSimple" && n.Inputs["ckpt_name"] == "missing.safetensors" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = fmt.Fprintf(w, `{"error":{"type":"prompt_outputs_failed_validation","message":"Prompt outputs failed validation","details":"","extra_info":{}},`+
					`"node_errors":{%q:{"errors":[{"type":"value_not_in_list","message":"Value not in list","details":"ckpt_name: 'missing.safetensors' not in []","extra_info":{}}],"dependent_outputs":["9"],"class_type":"CheckpointLoaderSimple"}}}`, id)
				return
			}
		}
		_, _ = w.Write([]byte(`{"prompt_id":"p-1","number":1,"node_errors":{}}`))
	case r.URL.Path == "/history/p-1":
		f.polls++
		if f.polls < 2 {
			_, _ = w.Write([]byte(`{}`))
			return
		}
		if f.failExec {
			_, _ = w.Write([]byte(`{"p-1":{"prompt":[],"outputs":{},"status":{"status_str":"error","completed":false,"messages":[["execution_start",{}],` +
				`["execution_error",{"node_id":"3","node_type":"KSampler","exception_message":"CUDA out of memory"}]]}}}`))
			return
		}
		_, _ = w.Write([]byte(`{"p-1":{"prompt":[],"outputs":{"9":{"images":[{"filename":"ComfyUI_00001_.png","subfolder":"","type":"output"}]}},` +
			`"status":{"status_str":"success","completed":true,"messages":[]}}}`))
	case r.URL.Path == "/view":
		if r.URL.Query().Get("filename") != "ComfyUI_00001_.png" || r.URL.Query().Get("type") != "output" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("PNG-BYTES"))
	default:
		http.NotFound(w, r)
	}
}

const workflow = `{"4":{"class_type":"CheckpointLoaderSimple","inputs":{"ckpt_name":"%s"}},` +
	`"10":{"class_type":"LoadImage","inputs":{"image":"init"}},"9":{"class_type":"SaveImage","inputs":{"images":["8",0]}}}`

func TestComfyUIRunner(t *testing.T) {
	comfy := &fakeComfy{uploads: map[string]string{}}
	srv := httptest.NewServer(comfy)
	defer srv.Close()
	store, blobSrv := newBlobs(t)
	store.objs["/in/init.png"] = []byte("INIT")
	r := agent.ComfyUIRunner{URL: srv.URL, PollEvery: 10 * time.Millisecond}
	if err := r.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	job := &agent.Job{Lease: agent.Lease{JobID: "c1", Input: json.RawMessage(fmt.Sprintf(`{"prompt":`+workflow+`}`, "sdxl.safetensors")),
		InputURLs: map[string]string{"init": blobSrv.URL + "/in/init.png"}, OutputURL: blobSrv.URL + "/out/output"}}
	res, err := r.Run(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if comfy.uploads["init"] != "INIT" {
		t.Fatalf("uploads %v", comfy.uploads)
	}
	if got := store.get("/out/output"); got != "PNG-BYTES" {
		t.Fatalf("output %q", got)
	}
	if !strings.Contains(string(res), `"prompt_id":"p-1"`) || !strings.Contains(string(res), "ComfyUI_00001_.png") {
		t.Fatalf("result %s", res)
	}

	// A node error is permanent, with ComfyUI's words.
	bad := &agent.Job{Lease: agent.Lease{JobID: "c2", Input: json.RawMessage(fmt.Sprintf(`{"prompt":`+workflow+`}`, "missing.safetensors"))}}
	_, err = r.Run(context.Background(), bad)
	var je *agent.JobError
	if !errors.As(err, &je) || je.Retryable || je.Code != "comfyui_validation" || !strings.Contains(je.Message, "node 4 (CheckpointLoaderSimple): Value not in list") {
		t.Fatalf("node error: %+v", err)
	}
	// An execution error is permanent too.
	comfy.mu.Lock()
	comfy.polls, comfy.failExec = 0, true
	comfy.mu.Unlock()
	_, err = r.Run(context.Background(), &agent.Job{Lease: agent.Lease{JobID: "c3", Input: json.RawMessage(fmt.Sprintf(`{"prompt":`+workflow+`}`, "sdxl.safetensors"))}})
	if !errors.As(err, &je) || je.Retryable || !strings.Contains(je.Message, "CUDA out of memory") {
		t.Fatalf("execution error: %+v", err)
	}
	// No ComfyUI: not ready, and a job is a retryable failure.
	down := agent.ComfyUIRunner{URL: "http://127.0.0.1:1"}
	if err := down.Ready(context.Background()); err == nil {
		t.Fatal("ready without a server")
	}
	_, err = down.Run(context.Background(), job)
	if !errors.As(err, &je) || !je.Retryable {
		t.Fatalf("unreachable: %+v", err)
	}
	// Not a workflow.
	_, err = r.Run(context.Background(), &agent.Job{Lease: agent.Lease{JobID: "c4", Input: json.RawMessage(`{"prompt":"a cat"}`)}})
	if !errors.As(err, &je) || je.Retryable || je.Code != "bad_input" {
		t.Fatalf("bad input: %+v", err)
	}
}
