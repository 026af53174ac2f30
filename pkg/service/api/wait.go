package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// The wait route's bounds: a wait lasts 1 to wire.MaxWaitSeconds
// (default DefaultWaitSeconds), inside API Gateway's 30 s integration
// timeout and the API function's 29 s, and reads its job again every
// WaitReread.
const (
	DefaultWaitSeconds = 20
	WaitReread         = time.Second
	// WaitFullRetry is the Retry-After of a wait refused at the cap: the
	// clients' interval between two looks at a job.
	WaitFullRetry = 2 * time.Second
)

// waitJob is GET /api/jobs/{job_id}/wait: the job as GET answers it, as
// soon as its status is no longer the one the caller gives (status; by
// default the one it has when the request arrives), or after seconds.
func (s *server) waitJob(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	secs := DefaultWaitSeconds
	if v := q.Get("seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > wire.MaxWaitSeconds {
			s.writeError(w, r, invalid("query \"seconds\": must be between 1 and %d", wire.MaxWaitSeconds))
			return
		}
		secs = n
	}
	since := job.Status(q.Get("status"))
	if since != "" && !since.Valid() {
		s.writeError(w, r, invalid("query \"status\": must be accepted, queued, leased, succeeded, dead or canceled: the status last seen"))
		return
	}
	c, raw := callerOf(r), r.PathValue("job_id")
	read := func(ctx context.Context) (job.Job, error) { return s.callerJob(ctx, c, raw) }
	j, err := read(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if since == "" {
		since = j.Status
	}
	if j.Status == since {
		// Only a wait that waits takes one of the stage's wait_concurrency.
		select {
		case s.waits <- struct{}{}:
			defer func() { <-s.waits }()
		default:
			s.writeError(w, r, &wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeRateLimited, RetryAfter: WaitFullRetry,
				Message: fmt.Sprintf("the stage holds its most waits at once (wait_concurrency %d); look with GET %s and wait again after the Retry-After seconds",
					cap(s.waits), strings.Replace(wire.PathJob, "{job_id}", raw, 1))})
			return
		}
	}
	j, err = waitForChange(r.Context(), s.Clock, WaitReread, time.Duration(secs)*time.Second, j, since, read)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v := viewJob(j)
	s.withEstimate(r.Context(), &v, j)
	wire.WriteJSON(w, http.StatusOK, v)
}

// waitForChange answers j as soon as its status is not since: j itself if
// it is already, else the first read (one every `every`) that finds it
// changed, or the read at the end of limit. A read's error ends the wait.
func waitForChange(ctx context.Context, clk clock.Clock, every, limit time.Duration, j job.Job, since job.Status,
	read func(context.Context) (job.Job, error)) (job.Job, error) {
	if j.Status != since {
		return j, nil
	}
	deadline := clk.NewTimer(limit)
	defer deadline.Stop()
	next := clk.NewTimer(every)
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-deadline.Chan():
			return read(ctx)
		case <-next.Chan():
			got, err := read(ctx)
			if err != nil || got.Status != since {
				return got, err
			}
			next.Reset(every)
		}
	}
}
