package assets

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// Limits on what a job may name.
const (
	MaxInputs   = 32
	MaxOutputs  = 16
	MaxKeyBytes = 1024
)

// namePattern is what an input or output name may look like: it becomes the
// last segment of an output key and a key of input_urls.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// TenantPrefix is where a tenant's objects live.
func TenantPrefix(tenant string) string { return "tenants/" + tenant + "/" }

// OutputKey is where a job's output (or its named output) is written.
func OutputKey(tenant, jobID, name string) string {
	k := TenantPrefix(tenant) + "jobs/" + jobID + "/output"
	if name != "" {
		k += "/" + name
	}
	return k
}

// Refs are the objects a job's input names.
type Refs struct {
	Inputs  map[string]string `json:"input_keys"`
	Outputs []string          `json:"outputs"`
}

// ParseRefs reads input_keys and outputs from a job's input document and
// checks them against the tenant: every key under the tenant's prefix, no
// path tricks, names that are safe as key segments. The error says what is
// wrong in the submission's terms.
func ParseRefs(tenant string, input json.RawMessage) (Refs, error) {
	var r Refs
	if len(input) == 0 || string(input) == "null" {
		return r, nil
	}
	var doc struct {
		Inputs  json.RawMessage `json:"input_keys"`
		Outputs json.RawMessage `json:"outputs"`
	}
	if err := json.Unmarshal(input, &doc); err != nil {
		return r, nil // not an object: the submission's own checks say so
	}
	if len(doc.Inputs) > 0 && string(doc.Inputs) != "null" {
		if err := json.Unmarshal(doc.Inputs, &r.Inputs); err != nil {
			return r, fmt.Errorf(`field "input.input_keys": must be an object of names to object keys`)
		}
	}
	if len(doc.Outputs) > 0 && string(doc.Outputs) != "null" {
		if err := json.Unmarshal(doc.Outputs, &r.Outputs); err != nil {
			return r, fmt.Errorf(`field "input.outputs": must be a list of output names`)
		}
	}
	if len(r.Inputs) > MaxInputs {
		return r, fmt.Errorf(`field "input.input_keys": at most %d inputs, got %d`, MaxInputs, len(r.Inputs))
	}
	if len(r.Outputs) > MaxOutputs {
		return r, fmt.Errorf(`field "input.outputs": at most %d outputs, got %d`, MaxOutputs, len(r.Outputs))
	}
	prefix := TenantPrefix(tenant)
	for name, key := range r.Inputs {
		if !namePattern.MatchString(name) {
			return r, fmt.Errorf(`field "input.input_keys": name %q must be 1-128 letters, digits, '.', '_' or '-'`, name)
		}
		if len(key) > MaxKeyBytes || !strings.HasPrefix(key, prefix) || len(key) == len(prefix) {
			return r, fmt.Errorf(`field "input.input_keys.%s": key %q must be an object under this tenant's prefix %q`, name, key, prefix)
		}
		if path.Clean("/"+key) != "/"+key || strings.Contains(key, "//") {
			return r, fmt.Errorf(`field "input.input_keys.%s": key %q must not contain "..", "." or empty segments`, name, key)
		}
	}
	seen := map[string]bool{}
	for _, name := range r.Outputs {
		if !namePattern.MatchString(name) || seen[name] {
			return r, fmt.Errorf(`field "input.outputs": %q must be a unique name of 1-128 letters, digits, '.', '_' or '-'`, name)
		}
		seen[name] = true
	}
	return r, nil
}

// Presigner is the part of the S3 presign client used here.
type Presigner interface {
	PresignGetObject(ctx context.Context, params *s3.GetObjectInput, optFns ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error)
	PresignPutObject(ctx context.Context, params *s3.PutObjectInput, optFns ...func(*s3.PresignOptions)) (*v4.PresignedHTTPRequest, error)
}

// URLs are a leased job's presigned URLs.
type URLs struct {
	Inputs  map[string]string
	Output  string
	Outputs map[string]string
}

// S3 presigns URLs on one bucket.
type S3 struct {
	Presign Presigner
	Bucket  string
	Clock   clock.Clock
	// Grace is added to a lease's remaining time for the URLs' expiry, so a
	// worker that heartbeats on time never holds an expired URL (default 1m).
	Grace time.Duration
	// UploadTTL is how long an upload URL is valid (default 15m).
	UploadTTL time.Duration
}

func (a *S3) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

// ttlFor ties a URL's expiry to the lease: its remaining time plus grace.
// S3 checks expiry when a request starts, so a long download or upload
// begun in time completes.
func (a *S3) ttlFor(j job.Job) time.Duration {
	grace := a.Grace
	if grace <= 0 {
		grace = time.Minute
	}
	return max(j.LeaseExpiresAt.Sub(a.now()), 0) + grace
}

// LeaseURLs presigns a GET per named input and a PUT for the output (or one
// per named output) of a leased job.
func (a *S3) LeaseURLs(ctx context.Context, j job.Job) (URLs, error) {
	refs, err := ParseRefs(j.TenantID, j.Input)
	if err != nil {
		// Validated at submission; a job stored before a rule changed.
		return URLs{}, fmt.Errorf("job %s: %w", j.ID, err)
	}
	ttl := a.ttlFor(j)
	u := URLs{Inputs: map[string]string{}}
	for name, key := range refs.Inputs {
		req, err := a.Presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(key)}, s3.WithPresignExpires(ttl))
		if err != nil {
			return URLs{}, fmt.Errorf("presign input %s of job %s: %w", name, j.ID, err)
		}
		u.Inputs[name] = req.URL
	}
	put := func(key string) (string, error) {
		req, err := a.Presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(key)}, s3.WithPresignExpires(ttl))
		if err != nil {
			return "", fmt.Errorf("presign output of job %s: %w", j.ID, err)
		}
		return req.URL, nil
	}
	if u.Output, err = put(OutputKey(j.TenantID, j.ID, "")); err != nil {
		return URLs{}, err
	}
	if len(refs.Outputs) > 0 {
		u.Outputs = map[string]string{}
		for _, name := range refs.Outputs {
			if u.Outputs[name], err = put(OutputKey(j.TenantID, j.ID, name)); err != nil {
				return URLs{}, err
			}
		}
	}
	return u, nil
}

// Upload is a presigned PUT for a producer's input file.
type Upload struct {
	Key       string    `json:"key"`
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// filenamePattern keeps upload names to one safe key segment.
var filenamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$`)

// ValidFilename reports whether a producer's filename may become a key segment.
func ValidFilename(name string) bool { return filenamePattern.MatchString(name) }

// NewUpload presigns a PUT of one input file under the tenant's uploads,
// with the given content type (the upload must send the same).
func (a *S3) NewUpload(ctx context.Context, tenant, filename, contentType string) (Upload, error) {
	ttl := a.UploadTTL
	if ttl <= 0 {
		ttl = 15 * time.Minute
	}
	key := TenantPrefix(tenant) + "uploads/" + uuid.NewString() + "/" + filename
	in := &s3.PutObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(key)}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	req, err := a.Presign.PresignPutObject(ctx, in, s3.WithPresignExpires(ttl))
	if err != nil {
		return Upload{}, fmt.Errorf("presign upload: %w", err)
	}
	return Upload{Key: key, URL: req.URL, ExpiresAt: a.now().Add(ttl).UTC()}, nil
}
