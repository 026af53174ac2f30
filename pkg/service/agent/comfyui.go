package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// ComfyUIRunner runs a job's input.prompt — a workflow in ComfyUI's API
// format — on the ComfyUI server of this machine:
//
//  1. each input_urls file is downloaded and uploaded with /upload/image
//     under its input name (the workflow's LoadImage nodes name it);
//  2. the workflow is queued with POST /prompt; a 400 (validation or node
//     errors) is a permanent failure;
//  3. GET /history/{prompt_id} is followed until the prompt completes; an
//     execution error is a permanent failure;
//  4. the output files are fetched with /view; the first is PUT to
//     output_url, and the files are PUT in order to the named output_urls.
//
// A ComfyUI that cannot be reached is a retryable failure. The result lists
// the output files per node.
type ComfyUIRunner struct {
	URL string // default http://127.0.0.1:8188
	// HTTP talks to ComfyUI (default: a client with a 60s timeout).
	HTTP *http.Client
	// PollEvery is how often /history is read (default 1s, on the job's
	// clock).
	PollEvery time.Duration
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

// Ready answers nil once ComfyUI's /system_stats answers.
func (r ComfyUIRunner) Ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base()+"/system_stats", nil)
	if err != nil {
		return err
	}
	res, err := r.http().Do(req)
	if err != nil {
		return fmt.Errorf("comfyui not reachable: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("comfyui /system_stats answered %s", res.Status)
	}
	return nil
}

type comfyFile struct {
	Filename  string `json:"filename"`
	Subfolder string `json:"subfolder"`
	Type      string `json:"type"`
}

func (r ComfyUIRunner) Run(ctx context.Context, j *Job) (json.RawMessage, error) {
	var in struct {
		Prompt json.RawMessage `json:"prompt"`
	}
	if err := json.Unmarshal(j.Input, &in); err != nil || len(in.Prompt) == 0 || in.Prompt[0] != '{' {
		return nil, Permanent("bad_input", "comfyui: input.prompt must be a workflow in ComfyUI's API format (a JSON object)")
	}
	if len(j.InputURLs) > 0 {
		dir, err := os.MkdirTemp("", "fleetq-comfy-")
		if err != nil {
			return nil, Retryable("workdir", "create input directory: %v", err)
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
	id, err := r.queue(ctx, j.JobID, in.Prompt)
	if err != nil {
		return nil, err
	}
	outputs, err := r.follow(ctx, j.clock(), id)
	if err != nil {
		if ctx.Err() != nil {
			r.interrupt()
		}
		return nil, err
	}
	return r.deliver(ctx, j, id, outputs)
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
		return Retryable("input_read", "read input %q: %v", name, err)
	}
	_, err = io.Copy(fw, f)
	f.Close()
	if err != nil {
		return Retryable("input_read", "read input %q: %v", name, err)
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
		return Retryable("comfyui_unreachable", "upload %q to comfyui: %v", name, err)
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return Retryable("comfyui_upload", "comfyui /upload/image answered %s: %s", res.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// queue posts the workflow and answers its prompt id.
func (r ComfyUIRunner) queue(ctx context.Context, clientID string, prompt json.RawMessage) (string, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "client_id": clientID})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base()+"/prompt", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := r.http().Do(req)
	if err != nil {
		return "", Retryable("comfyui_unreachable", "queue prompt on comfyui: %v", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var out struct {
		PromptID string `json:"prompt_id"`
		Error    *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Details string `json:"details"`
		} `json:"error"`
		NodeErrors map[string]struct {
			ClassType string `json:"class_type"`
			Errors    []struct {
				Message string `json:"message"`
				Details string `json:"details"`
			} `json:"errors"`
		} `json:"node_errors"`
	}
	_ = json.Unmarshal(raw, &out)
	switch {
	case res.StatusCode == http.StatusBadRequest:
		msg := "comfyui rejected the workflow"
		if out.Error != nil {
			msg += ": " + out.Error.Message
			if out.Error.Details != "" {
				msg += " (" + out.Error.Details + ")"
			}
		}
		nodes := make([]string, 0, len(out.NodeErrors))
		for id := range out.NodeErrors {
			nodes = append(nodes, id)
		}
		sort.Strings(nodes)
		for _, id := range nodes {
			ne := out.NodeErrors[id]
			for _, e := range ne.Errors {
				msg += fmt.Sprintf("; node %s (%s): %s", id, ne.ClassType, e.Message)
				if e.Details != "" {
					msg += " " + e.Details
				}
			}
		}
		return "", Permanent("comfyui_validation", "%s", msg)
	case res.StatusCode != http.StatusOK:
		return "", Retryable("comfyui_error", "comfyui /prompt answered %s", res.Status)
	case out.PromptID == "":
		return "", Retryable("comfyui_error", "comfyui /prompt answered no prompt_id")
	}
	return out.PromptID, nil
}

// follow reads /history/{id} until the prompt completes and answers its
// output files by node.
func (r ComfyUIRunner) follow(ctx context.Context, clk clock.Clock, id string) (map[string][]comfyFile, error) {
	every := r.PollEvery
	if every <= 0 {
		every = time.Second
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-clk.After(every):
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base()+"/history/"+url.PathEscape(id), nil)
		if err != nil {
			return nil, err
		}
		res, err := r.http().Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, Retryable("comfyui_unreachable", "follow prompt on comfyui: %v", err)
		}
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 8<<20))
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return nil, Retryable("comfyui_error", "comfyui /history answered %s", res.Status)
		}
		var hist map[string]struct {
			Outputs map[string]map[string]json.RawMessage `json:"outputs"`
			Status  struct {
				StatusStr string            `json:"status_str"`
				Completed bool              `json:"completed"`
				Messages  []json.RawMessage `json:"messages"`
			} `json:"status"`
		}
		if err := json.Unmarshal(raw, &hist); err != nil {
			return nil, Retryable("comfyui_error", "comfyui /history: %v", err)
		}
		h, ok := hist[id]
		if !ok {
			continue // still queued or running
		}
		if h.Status.StatusStr == "error" {
			return nil, Permanent("comfyui_execution", "comfyui failed to execute the workflow: %s", executionError(h.Status.Messages))
		}
		if !h.Status.Completed && h.Status.StatusStr != "success" {
			continue
		}
		files := map[string][]comfyFile{}
		for node, kinds := range h.Outputs {
			for _, kind := range sortedRawKeys(kinds) {
				var fs []comfyFile
				if json.Unmarshal(kinds[kind], &fs) == nil {
					for _, f := range fs {
						if f.Filename != "" && f.Type == "output" {
							files[node] = append(files[node], f)
						}
					}
				}
			}
		}
		return files, nil
	}
}

// executionError finds the execution_error message in a history status.
func executionError(messages []json.RawMessage) string {
	for _, m := range messages {
		var pair []json.RawMessage
		if json.Unmarshal(m, &pair) != nil || len(pair) != 2 {
			continue
		}
		var kind string
		_ = json.Unmarshal(pair[0], &kind)
		if kind != "execution_error" {
			continue
		}
		var e struct {
			NodeID    string `json:"node_id"`
			NodeType  string `json:"node_type"`
			Exception string `json:"exception_message"`
		}
		if json.Unmarshal(pair[1], &e) == nil {
			return fmt.Sprintf("node %s (%s): %s", e.NodeID, e.NodeType, strings.TrimSpace(e.Exception))
		}
	}
	return "see the ComfyUI log"
}

// deliver fetches the outputs with /view and PUTs them to the job's URLs.
func (r ComfyUIRunner) deliver(ctx context.Context, j *Job, id string, outputs map[string][]comfyFile) (json.RawMessage, error) {
	nodes := make([]string, 0, len(outputs))
	for n := range outputs {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var ordered []comfyFile
	for _, n := range nodes {
		ordered = append(ordered, outputs[n]...)
	}
	main, named := j.Outputs()
	targets := []string{}
	if main != "" {
		targets = append(targets, main)
	}
	for _, name := range sortedKeys(named) {
		targets = append(targets, named[name])
	}
	for i, f := range ordered {
		if i >= len(targets) {
			break
		}
		if err := r.copyOut(ctx, j.HTTP, f, targets[i]); err != nil {
			return nil, err
		}
	}
	return json.Marshal(map[string]any{"prompt_id": id, "outputs": outputs, "uploaded": min(len(ordered), len(targets))})
}

func (r ComfyUIRunner) copyOut(ctx context.Context, hc *http.Client, f comfyFile, target string) error {
	q := url.Values{"filename": {f.Filename}, "subfolder": {f.Subfolder}, "type": {f.Type}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base()+"/view?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	res, err := r.http().Do(req)
	if err != nil {
		return Retryable("comfyui_unreachable", "fetch output %s: %v", f.Filename, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return Retryable("comfyui_error", "comfyui /view %s answered %s", f.Filename, res.Status)
	}
	tmp, err := os.CreateTemp("", "fleetq-out-*"+filepath.Ext(f.Filename))
	if err != nil {
		return Retryable("workdir", "%v", err)
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, res.Body)
	tmp.Close()
	if err != nil {
		return Retryable("comfyui_error", "fetch output %s: %v", f.Filename, err)
	}
	if err := upload(ctx, hc, target, tmp.Name()); err != nil {
		return Retryable("output_upload", "upload output %s: %v", f.Filename, err)
	}
	return nil
}

// interrupt asks ComfyUI to stop the running prompt (best effort).
func (r ComfyUIRunner) interrupt() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base()+"/interrupt", nil)
	if err != nil {
		return
	}
	if res, err := r.http().Do(req); err == nil {
		res.Body.Close()
	}
}

func sortedRawKeys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
