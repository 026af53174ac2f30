package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewBufferString(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestJobAssetsThroughPresignedURLs is the producer-to-worker path of a job
// with an uploaded input and two outputs, through the embedded S3 server.
func TestJobAssetsThroughPresignedURLs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do("POST", "/api/uploads", "op", map[string]any{"tenant_id": "acme", "filename": "scene.blend"})
	h.want(r, 200, "")
	key, url := r.body["key"].(string), r.body["url"].(string)
	if !strings.HasPrefix(key, "tenants/acme/uploads/") || r.body["expires_at"] == nil {
		t.Fatalf("upload answer %v", r.body)
	}
	if code, body := httpDo(t, "PUT", url, "mesh-bytes"); code != 200 {
		t.Fatalf("upload PUT: %d %s", code, body)
	}

	h.want(h.do("POST", "/api/jobs", "op", map[string]any{"tenant_id": "evil", "workflow_id": "wf-a", "input": map[string]any{"input_keys": map[string]any{"scene": key}}}), 400, "invalid_argument")
	id := h.submit(map[string]any{"job_id": "render-1", "tenant_id": "acme", "workflow_id": "wf-a",
		"input": map[string]any{"input_keys": map[string]any{"scene": key}, "outputs": []string{"frame.png"}}})

	token := h.register("w1", "gpu")
	lr := h.do("POST", "/api/worker/poll", token, map[string]any{})
	h.want(lr, 200, "")
	j := lr.body["job"].(map[string]any)
	in := j["input_urls"].(map[string]any)["scene"].(string)
	if code, body := httpDo(t, "GET", in, ""); code != 200 || body != "mesh-bytes" {
		t.Fatalf("input GET: %d %q", code, body)
	}
	out := j["output_urls"].(map[string]any)["frame.png"].(string)
	if code, body := httpDo(t, "PUT", out, "png-bytes"); code != 200 {
		t.Fatalf("output PUT: %d %s", code, body)
	}
	obj, err := h.stack.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(h.stack.Bucket), Key: aws.String("tenants/acme/jobs/" + id + "/output/frame.png")})
	if err != nil {
		t.Fatalf("output not under the tenant's prefix: %v", err)
	}
	b, _ := io.ReadAll(obj.Body)
	if string(b) != "png-bytes" {
		t.Fatalf("output = %q", b)
	}

	hb := h.do("POST", "/api/worker/heartbeat", token, map[string]any{"job_id": id, "lease_token": j["lease_token"], "refresh_urls": true})
	h.want(hb, 200, "")
	if _, ok := hb.body["input_urls"].(map[string]any)["scene"].(string); !ok || hb.body["output_url"] == "" {
		t.Fatalf("refreshing heartbeat: %v", hb.body)
	}
	plain := h.do("POST", "/api/worker/heartbeat", token, map[string]any{"job_id": id, "lease_token": j["lease_token"]})
	if _, has := plain.body["input_urls"]; has {
		t.Fatal("a plain heartbeat carries no URLs")
	}
}

func TestUploadErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.want(h.do("POST", "/api/uploads", "", map[string]any{"tenant_id": "acme", "filename": "a.png"}), 401, "unauthenticated")
	for _, body := range []map[string]any{
		{"filename": "a.png"},
		{"tenant_id": "acme"},
		{"tenant_id": "acme", "filename": "../a.png"},
		{"tenant_id": "acme", "filename": "a/b.png"},
		{"tenant_id": "ac me", "filename": "a.png"},
		{"tenant_id": "acme", "filename": "a.png", "bucket": "other"},
	} {
		h.want(h.do("POST", "/api/uploads", "op", body), 400, "invalid_argument")
	}
}
