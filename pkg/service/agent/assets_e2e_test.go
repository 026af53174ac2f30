package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/service/agent"
)

// The whole path of a job with files, over HTTP as a producer and a worker
// see it: upload an input through a presigned URL, submit a job naming it,
// an exec worker downloads it and writes its output, which lands under the
// tenant's prefix, and the outcome is announced as Job Succeeded.
func TestJobWithInputAndOutputUnderTheDevStack(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	call := func(method, path string, body any) map[string]any {
		t.Helper()
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, e.stack.URL+path, bytes.NewReader(data))
		req.Header.Set("Authorization", "Bearer "+e.stack.OperatorToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out
	}
	up := call("POST", "/api/uploads", map[string]any{"tenant_id": "acme", "filename": "scene.txt", "content_type": "text/plain"})
	req, _ := http.NewRequest(http.MethodPut, up["url"].(string), strings.NewReader("three cubes"))
	req.Header.Set("Content-Type", "text/plain")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("upload: %v %v", res, err)
	}
	res.Body.Close()

	sub := call("POST", "/api/jobs", map[string]any{"job_id": "acme:render-1", "tenant_id": "acme", "workflow_id": "render",
		"input": map[string]any{"input_keys": map[string]string{"scene": up["key"].(string)}}})
	if sub["job_id"] != "acme:render-1" {
		t.Fatalf("submit: %v", sub)
	}
	e.start("exec-1", agent.ExecRunner{Command: `tr a-z A-Z < "$FLEETQ_INPUT_DIR/scene" > "$FLEETQ_OUTPUT_DIR/output"; echo '{"rendered":true}'`})
	e.waitFor("render-1 to succeed", func() bool {
		j, err := e.stack.Store.GetJob(e.ctx, "acme:render-1")
		return err == nil && j.Status == job.Succeeded
	})
	obj, err := e.stack.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(e.stack.Bucket), Key: aws.String("tenants/acme/jobs/acme:render-1/output")})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if string(data) != "THREE CUBES" {
		t.Fatalf("output %q", data)
	}
	e.waitFor("the Job Succeeded event", func() bool {
		for _, ev := range e.stack.Events.Recent(10) {
			if b, _ := json.Marshal(ev); strings.Contains(string(b), "Job Succeeded") && strings.Contains(string(b), "acme:render-1") {
				return true
			}
		}
		return false
	})
}

// recordingRunner notes the output URL a job started with and the one it
// would upload to at its end.
type recordingRunner struct {
	agent.ExecRunner
	mu           sync.Mutex
	first, final string
}

func (r *recordingRunner) Run(ctx context.Context, j *agent.Job) (json.RawMessage, error) {
	res, err := r.ExecRunner.Run(ctx, j)
	main, _ := j.Outputs()
	r.mu.Lock()
	r.first, r.final = j.OutputURL, main
	r.mu.Unlock()
	return res, err
}

// A job that outlives its presigned URLs uploads with fresh ones its
// heartbeats fetched (here the margin makes every heartbeat refresh).
func TestLongJobUploadsWithRefreshedURLs(t *testing.T) {
	t.Parallel()
	e := newStack(t, false)
	e.create("long-out", `{}`)
	r := &recordingRunner{ExecRunner: agent.ExecRunner{Command: `sleep 2.5; echo done > "$FLEETQ_OUTPUT_DIR/output"`}}
	e.start("exec-2", r, func(c *agent.Config) { c.URLRefreshMargin = time.Hour })
	e.waitFor("long-out to succeed", func() bool {
		j, err := e.stack.Store.GetJob(e.ctx, "long-out")
		return err == nil && j.Status == job.Succeeded
	})
	r.mu.Lock()
	first, final := r.first, r.final
	r.mu.Unlock()
	if first == "" || final == "" || first == final {
		t.Fatalf("output URL not refreshed: started with %q, uploaded to %q", first, final)
	}
	obj, err := e.stack.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(e.stack.Bucket), Key: aws.String("tenants/t/jobs/long-out/output")})
	if err != nil {
		t.Fatal(err)
	}
	obj.Body.Close()
}
