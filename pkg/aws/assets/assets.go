package assets

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/jobinput"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

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
	// Log is a presigned PUT for the attempt's runner output.
	Log string
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
	refs, err := jobinput.ParseRefs(j.TenantID, j.Input)
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
	if u.Output, err = put(jobinput.OutputKey(j.TenantID, j.ID, "")); err != nil {
		return URLs{}, err
	}
	if j.Attempts > 0 {
		if u.Log, err = put(jobinput.LogKey(j.TenantID, j.ID, jobinput.Runs(j.Attempts, j.Preemptions))); err != nil {
			return URLs{}, err
		}
	}
	if len(refs.Outputs) > 0 {
		u.Outputs = map[string]string{}
		for _, name := range refs.Outputs {
			if u.Outputs[name], err = put(jobinput.OutputKey(j.TenantID, j.ID, name)); err != nil {
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
	key := jobinput.TenantPrefix(tenant) + "uploads/" + uuid.NewString() + "/" + filename
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

// LogURL is a presigned GET of one run's log.
type LogURL struct {
	Run       int
	URL       string
	ExpiresAt time.Time
}

// LogTTL is how long a log URL is valid.
const LogTTL = 15 * time.Minute

// LogURLs presigns a GET of each run's log, from the first to the job's
// latest (a log the agent never uploaded answers S3's 404).
func (a *S3) LogURLs(ctx context.Context, j job.Job) ([]LogURL, error) {
	runs := jobinput.Runs(j.Attempts, j.Preemptions)
	out := make([]LogURL, 0, runs)
	for n := 1; n <= runs; n++ {
		key := jobinput.LogKey(j.TenantID, j.ID, n)
		req, err := a.Presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(key)}, s3.WithPresignExpires(LogTTL))
		if err != nil {
			return nil, fmt.Errorf("presign log %d of job %s: %w", n, j.ID, err)
		}
		out = append(out, LogURL{Run: n, URL: req.URL, ExpiresAt: a.now().Add(LogTTL).UTC()})
	}
	return out, nil
}
