package api_test

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/events"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

// lifecycleCost is the DynamoDB requests one job costs in each phase.
type lifecycleCost struct {
	submit, dispatch, lease, heartbeat, complete int64
}

func (c lifecycleCost) total() int64 {
	return c.submit + c.dispatch + c.lease + c.heartbeat + c.complete
}

// countingHarness is a dev stack whose DynamoDB client counts every request
// attempt with the SDK middleware. No background relay runs (it would add
// requests of its own); announce says whether the API publishes a job's
// events right after its transition. A submission is received again only
// after the devstack's default visibility timeout, not the harness's 2 s: a
// dispatch slower than that on a loaded machine would be delivered twice,
// and the second delivery's request counted in a later phase of the job.
func countingHarness(tb testing.TB, announce bool) (*harness, *atomic.Int64) {
	var n atomic.Int64
	h := newHarness(tb, func(o *devstack.Options) {
		o.RelayInterval, o.NoAnnounce, o.VisibilityTimeout = -1, !announce, 0
		o.DynamoDBOptions = append(o.DynamoDBOptions, func(d *dynamodb.Options) {
			d.APIOptions = append(d.APIOptions, awsenv.CountRequests(&n))
		})
	})
	return h, &n
}

// runLifecycle submits one job over HTTP and takes it through dispatch, a
// lease, one heartbeat and completion, counting requests per phase. Waiting
// for dispatch watches the SQS queue, not the table, so it costs nothing.
func runLifecycle(h *harness, n *atomic.Int64, token, id string) lifecycleCost {
	h.t.Helper()
	var c lifecycleCost
	mark := n.Load()
	phase := func(into *int64) {
		now := n.Load()
		*into, mark = now-mark, now
	}
	h.want(h.do("POST", "/api/jobs", "op", map[string]any{"job_id": id, "tenant_id": "t", "workflow_id": "wf-a", "input": map[string]any{"n": 1}}), 202, "")
	id = "t:" + id
	phase(&c.submit)
	h.waitFor(h.submissionQueueEmpty, "dispatch of "+id)
	phase(&c.dispatch)
	l, r := h.poll(token)
	if r.status != 200 || l.id != id {
		h.t.Fatalf("poll: %d %s", r.status, r.raw)
	}
	phase(&c.lease)
	h.want(h.do("POST", "/api/worker/heartbeat", token, map[string]any{"job_id": id, "lease_token": l.token, "progress": 0.5}), 200, "")
	phase(&c.heartbeat)
	h.want(h.do("POST", "/api/worker/complete", token, map[string]any{"job_id": id, "lease_token": l.token, "result": map[string]any{"ok": true}}), 200, "")
	phase(&c.complete)
	return c
}

// TestJobLifecycleCostsAtMostEightRequests holds the request budget of
// docs/benchmarks.md: submit, dispatch, lease, one heartbeat and complete
// together cost at most eight DynamoDB requests; the one job whose
// dispatch wakes its fleet from zero pays the wake's write on top. The
// count is exact, not timed, so it is checked here as well as reported by
// the benchmark.
func TestJobLifecycleCostsAtMostEightRequests(t *testing.T) {
	t.Parallel()
	h, n := countingHarness(t, false)
	token := h.register("w1", "gpu")
	for i := range 3 {
		c := runLifecycle(h, n, token, fmt.Sprintf("cost-%d", i))
		budget := int64(8)
		if i == 0 {
			budget++ // the batch that wakes the fleet writes the wake
		}
		if c.total() > budget {
			t.Fatalf("job %d cost %d requests (%+v), budget %d", i, c.total(), c, budget)
		}
		// Dispatch starts as soon as the submission is queued, so on a busy
		// machine its first request can land before the submit's phase is
		// read: the two are held together, by the budget above.
		if c.submit < 1 || c.heartbeat != 1 || c.complete != 1 {
			t.Fatalf("job %d: %+v; submit writes the accepted job, heartbeat and complete are one transaction each", i, c)
		}
	}
}

// TestAnnouncingAnOutcomeCostsFourRequests: publishing the completion's
// event from the outbox reads the job's pending events (its outbox shard
// and, at once, the partition the previous release filed events in) and
// the job, and deletes the event once published. Pricing the job reads
// the fleet's Spot prices item once a minute per process
// (docs/data-model.md): the first announcement pays that read, the next
// within the minute does not.
func TestAnnouncingAnOutcomeCostsFourRequests(t *testing.T) {
	t.Parallel()
	h, n := countingHarness(t, true)
	token := h.register("w1", "gpu")
	first := runLifecycle(h, n, token, "announced-first")
	c := runLifecycle(h, n, token, "announced")
	if first.complete != 1+4+1 || c.complete != 1+4 {
		t.Fatalf("complete with its announcement cost %d, then %d requests (%+v), want 1 + 4 + the prices read, then 1 + 4", first.complete, c.complete, c)
	}
	evs := h.stack.Events.Recent(0)
	if len(evs) != 2 || evs[1].DetailType != "Job Succeeded" || evs[1].Detail.JobID != "t:announced" {
		t.Fatalf("bus holds %+v, want the two Job Succeeded", evs)
	}
}

// BenchmarkJobLifecycle reports DynamoDB requests per job by phase, without
// and with the outcome's announcement.
func BenchmarkJobLifecycle(b *testing.B) {
	b.Run("lifecycle", func(b *testing.B) { benchLifecycle(b, false) })
	b.Run("with-announcement", func(b *testing.B) { benchLifecycle(b, true) })
}

func benchLifecycle(b *testing.B, announce bool) {
	h, n := countingHarness(b, announce)
	token := h.register("w1", "gpu")
	var sum lifecycleCost
	b.ResetTimer()
	for i := range b.N {
		c := runLifecycle(h, n, token, fmt.Sprintf("bench-%d", i))
		sum.submit += c.submit
		sum.dispatch += c.dispatch
		sum.lease += c.lease
		sum.heartbeat += c.heartbeat
		sum.complete += c.complete
	}
	per := func(v int64) float64 { return float64(v) / float64(b.N) }
	b.ReportMetric(per(sum.total()), "ddb-requests/job")
	b.ReportMetric(per(sum.submit), "submit-requests/job")
	b.ReportMetric(per(sum.dispatch), "dispatch-requests/job")
	b.ReportMetric(per(sum.lease), "lease-requests/job")
	b.ReportMetric(per(sum.heartbeat+sum.complete), "report-requests/job")
}

// BenchmarkIdleTick reports the DynamoDB requests of one scheduled scaler
// tick over a stage whose fleets are at zero with nothing queued: what an
// idle stage pays every minute (docs/deploy.md, "What an idle stage costs").
func BenchmarkIdleTick(b *testing.B) {
	h, n := countingHarness(b, false)
	var tick map[string]any
	raw, err := events.FS.ReadFile("schedule-tick.json")
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(raw, &tick); err != nil {
		b.Fatal(err)
	}
	h.want(h.do("POST", "/local/events", "op", tick), 200, "") // the first tick records the fleets' state
	start := n.Load()
	b.ResetTimer()
	for range b.N {
		h.want(h.do("POST", "/local/events", "op", tick), 200, "")
	}
	per := float64(n.Load()-start) / float64(b.N)
	b.ReportMetric(per, "ddb-requests/tick")
	b.ReportMetric(per/float64(len(h.stack.Config.Fleets)), "ddb-requests/tick/fleet")
}
