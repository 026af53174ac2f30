package assets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetq/fleetq/pkg/aws/assets"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// TestPresignedURLsRoundTrip presigns with the real SDK against the embedded
// S3 server and uses the URLs with a plain HTTP client, as a worker does.
func TestPresignedURLsRoundTrip(t *testing.T) {
	ctx := context.Background()
	srv, err := localaws.StartS3("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client := s3.NewFromConfig(localaws.Config(srv.URL), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("assets")}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a := &assets.S3{Presign: s3.NewPresignClient(client), Bucket: "assets", Clock: clock.NewFake(now)}

	up, err := a.NewUpload(ctx, "acme", "cat.png", "image/png")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(up.Key, "tenants/acme/uploads/") || !strings.HasSuffix(up.Key, "/cat.png") {
		t.Fatalf("upload key %q", up.Key)
	}
	put(t, up.URL, "image/png", "meow")

	j := job.Job{ID: "j1", TenantID: "acme", LeaseExpiresAt: now.Add(2 * time.Minute),
		Input: json.RawMessage(`{"input_keys":{"image":"` + up.Key + `"},"outputs":["clip.mp4"]}`)}
	u, err := a.LeaseURLs(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, u.Inputs["image"]); got != "meow" {
		t.Fatalf("input via its URL = %q", got)
	}
	put(t, u.Output, "", "result")
	put(t, u.Outputs["clip.mp4"], "", "frames")
	for key, want := range map[string]string{"tenants/acme/jobs/j1/output": "result", "tenants/acme/jobs/j1/output/clip.mp4": "frames"} {
		obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("assets"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		b, _ := io.ReadAll(obj.Body)
		if string(b) != want {
			t.Fatalf("%s = %q, want %q", key, b, want)
		}
	}
	if !strings.Contains(u.Inputs["image"], "X-Amz-Expires=180") {
		t.Fatalf("input URL %s: want an expiry of the lease's 2 minutes plus 1 minute of grace", u.Inputs["image"])
	}
}

func put(t *testing.T, url, contentType, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, bytes.NewBufferString(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("PUT: %d %s", res.StatusCode, b)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d %s", res.StatusCode, b)
	}
	return string(b)
}
