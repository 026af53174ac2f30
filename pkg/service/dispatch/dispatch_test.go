package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/testenv"
	"github.com/fleetq/fleetq/pkg/service/dispatch"
	"github.com/fleetq/fleetq/pkg/service/system"

	samples "github.com/fleetq/fleetq/events"
)

// newEnv is what the dispatch function's composition root builds, on a
// fresh table.
func newEnv(t *testing.T, cfg *fleetconfig.Config) *system.Env {
	t.Helper()
	client, table := testenv.DynamoDB(t)
	env, err := system.New(cfg, client, table, clock.Real{}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func msg(id, body string) events.SQSMessage { return events.SQSMessage{MessageId: id, Body: body} }

type recordingWaker struct{ fleets []string }

func (w *recordingWaker) Wake(_ context.Context, fleet string, _ int) error {
	w.fleets = append(w.fleets, fleet)
	return nil
}

func TestSampleBatchCreatesGoodAndRecordsBad(t *testing.T) {
	t.Parallel()
	st := newEnv(t, fleetconfig.Default()).Store
	data, err := samples.FS.ReadFile("sqs-submission-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	waker := &recordingWaker{}
	h := newHandler(t, fleetconfig.Default(), st, dispatch.Config{Waker: waker})
	ctx := context.Background()
	resp, err := h.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	j, err := st.GetJob(ctx, "acme:render-0001")
	if err != nil || j.Status != job.Queued || j.FleetSlug != "demo" {
		t.Fatalf("good record: %+v, %v", j, err)
	}
	rej, err := st.ListRejections(ctx, 10)
	if err != nil || len(rej) != 1 || rej[0].MessageID != ev.Records[1].MessageId {
		t.Fatalf("rejections = %+v, %v", rej, err)
	}
	if len(waker.fleets) != 1 || waker.fleets[0] != "demo" {
		t.Fatalf("woken fleets = %v", waker.fleets)
	}
	// Redelivery of the whole batch creates nothing twice and wakes nobody.
	waker.fleets = nil
	resp, err = h.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 || len(waker.fleets) != 0 {
		t.Fatalf("redelivery = %+v, %v, woken %v", resp, err, waker.fleets)
	}
	if again, _ := st.GetJob(ctx, "acme:render-0001"); again.CreatedAt != j.CreatedAt {
		t.Fatal("the job was recreated")
	}
}

func TestMissingJobIDUsesMessageID(t *testing.T) {
	t.Parallel()
	st := newEnv(t, fleetconfig.Default()).Store
	h := newHandler(t, fleetconfig.Default(), st, dispatch.Config{})
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg("m-77", `{"tenant_id":"t","workflow_id":"demo-exec"}`)}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp, err)
	}
	if j, err := st.GetJob(context.Background(), "t:m-77"); err != nil || j.WorkflowID != "demo-exec" {
		t.Fatalf("job m-77: %+v, %v", j, err)
	}
}

// flakyStore fails the creation of chosen jobs, as a throttled or unreachable
// table would.
type flakyStore struct {
	dispatch.Store
	failFor map[string]bool
}

func (f *flakyStore) CreateJob(ctx context.Context, n job.Spec) (job.Job, bool, error) {
	if f.failFor[n.ID] {
		return job.Job{}, false, errors.New("ProvisionedThroughputExceededException")
	}
	return f.Store.CreateJob(ctx, n)
}

func TestTransientFailureRedeliversOnlyThatRecord(t *testing.T) {
	t.Parallel()
	st := newEnv(t, fleetconfig.Default()).Store
	h := newHandler(t, fleetconfig.Default(), &flakyStore{Store: st, failFor: map[string]bool{"t:b": true}}, dispatch.Config{})
	ev := events.SQSEvent{Records: []events.SQSMessage{
		msg("m1", `{"job_id":"a","tenant_id":"t","workflow_id":"demo-sleep"}`),
		msg("m2", `{"job_id":"b","tenant_id":"t","workflow_id":"demo-sleep"}`),
		msg("m3", `{"job_id":"c","tenant_id":"t","workflow_id":"demo-sleep"}`),
		msg("m4", `{"job_id":"d","tenant_id":"t","workflow_id":"demo-sleep","priority":"urgent"}`),
	}}
	resp, err := h.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m2" {
		t.Fatalf("failures = %+v, want only m2", resp.BatchItemFailures)
	}
	for _, id := range []string{"t:a", "t:c"} {
		if _, err := st.GetJob(context.Background(), id); err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
	}
	if _, err := st.GetJob(context.Background(), "d"); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("malformed record made a job: %v", err)
	}
}

type countingWaker struct{ jobs map[string]int }

func (w *countingWaker) Wake(_ context.Context, fleet string, jobs int) error {
	w.jobs[fleet] += jobs
	return nil
}

// A batch wakes its fleet for the work that can run: a tenant capped at 2
// leased jobs counts for 2 of its 10 new jobs, an uncapped one for all 3.
func TestWakeCountsACappedTenantUpToItsCap(t *testing.T) {
	t.Parallel()
	cfg := fleetconfig.Default()
	cfg.Tenants = append(cfg.Tenants, fleetconfig.Tenant{ID: "capped", MaxLeased: 2})
	st := newEnv(t, cfg).Store
	var ev events.SQSEvent
	for i := range 13 {
		tenant := "capped"
		if i >= 10 {
			tenant = "free"
		}
		id := fmt.Sprintf("%s-%02d", tenant, i)
		ev.Records = append(ev.Records, msg("m-"+id, fmt.Sprintf(`{"job_id":%q,"tenant_id":%q,"workflow_id":"demo-sleep","input":{}}`, id, tenant)))
	}
	waker := &countingWaker{jobs: map[string]int{}}
	h := newHandler(t, cfg, st, dispatch.Config{Waker: waker})
	resp, err := h.Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	if waker.jobs["demo"] != 5 {
		t.Fatalf("woken for %v, want demo: 5 (2 capped + 3 free)", waker.jobs)
	}
}

// newHandler is dispatch.New with a silent logger.
func newHandler(t *testing.T, cfg *fleetconfig.Config, st dispatch.Store, c dispatch.Config) *dispatch.Handler {
	t.Helper()
	h, err := dispatch.New(cfg, st, slog.New(slog.DiscardHandler), c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestNewRequiresConfigStoreAndLogger(t *testing.T) {
	t.Parallel()
	st, log := struct{ dispatch.Store }{}, slog.New(slog.DiscardHandler)
	for name, err := range map[string]error{
		"config": func() error { _, err := dispatch.New(nil, st, log, dispatch.Config{}); return err }(),
		"store":  func() error { _, err := dispatch.New(fleetconfig.Default(), nil, log, dispatch.Config{}); return err }(),
		"logger": func() error { _, err := dispatch.New(fleetconfig.Default(), st, nil, dispatch.Config{}); return err }(),
	} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New without a %s: %v", name, err)
		}
	}
}
