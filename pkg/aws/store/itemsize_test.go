package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/submission"
	"github.com/fleetq/fleetq/pkg/local/testenv"
)

const budgetConfig = `
stage: test
fleets:
  - slug: gpu
    workflows: [wf-a]
    instance_types: [g5.xlarge]
    retry:
      max_attempts: 20
      backoff: [1m]
`

// jsonObject returns a JSON object of exactly n bytes.
func jsonObject(n int) json.RawMessage {
	return json.RawMessage(`{"x":"` + strings.Repeat("é", (n-len(`{"x":""}`))/2) + strings.Repeat("a", (n-len(`{"x":""}`))%2) + `"}`)
}

// TestLargestJobCompletesWithinTheItemLimit takes a job with every field at
// its largest (ids, input, a full history of failures with the longest error,
// the largest result) to success against a DynamoDB that enforces the 400 KB
// item limit, and checks that a result past the budget would not have fitted.
func TestLargestJobCompletesWithinTheItemLimit(t *testing.T) {
	t.Parallel()
	if testenv.OnDynalite() {
		// dynalite counts a string's size in UTF-16 code units (JavaScript's
		// length), not UTF-8 bytes as DynamoDB does; this job's text is
		// two-byte characters, so dynalite takes the result past the budget
		// that DynamoDB refuses.
		t.Skip("dynalite sizes strings in UTF-16 code units, not UTF-8 bytes (docs/testing.md)")
	}
	cfg, err := fleetconfig.Parse("budget.yaml", []byte(budgetConfig))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, cfg)
	long := func(c string) string { return c + strings.Repeat("x", 127) }
	id := long("j")
	input := jsonObject(submission.MaxInputBytes)
	if len(input) != submission.MaxInputBytes {
		t.Fatalf("input is %d bytes", len(input))
	}
	callback := "https://hooks.example.com/" + strings.Repeat("p", submission.MaxCallbackURLBytes-len("https://hooks.example.com/"))
	if _, created, err := e.st.CreateJob(e.ctx, job.Spec{ID: id, TenantID: long("t"), WorkflowID: "wf-a", Input: input, CallbackURL: callback}); err != nil || !created {
		t.Fatalf("CreateJob: %v", err)
	}
	w := e.register(long("w"), "gpu", 1)
	jobErr := job.Error{Code: strings.Repeat("c", 128), Message: strings.Repeat("m", 8192), Retryable: true}
	for i := 0; i < 15; i++ {
		j := e.lease(w)
		if _, err := e.st.Fail(e.ctx, w, id, j.LeaseToken, jobErr); err != nil {
			t.Fatalf("fail %d: %v", i, err)
		}
		e.clock.Advance(time.Hour)
	}
	j := e.lease(w)
	if len(j.History) < job.HistoryLimit {
		t.Fatalf("history holds %d entries; the test needs a full one", len(j.History))
	}

	// Past the budget the same job cannot record its result: the limit is
	// enforced, and the write changed nothing.
	over := jsonObject(submission.MaxResultBytes + submission.ItemReserveBytes)
	if err := e.st.Complete(e.ctx, w, id, j.LeaseToken, over); !errors.Is(err, store.ErrItemTooLarge) {
		t.Fatalf("Complete with a result past the budget = %v, want ErrItemTooLarge", err)
	}
	e.wantStatus(id, job.Leased)
	e.wantLeases(w.WorkerID, 1)

	result := jsonObject(submission.MaxResultBytes)
	if err := e.st.Complete(e.ctx, w, id, j.LeaseToken, result); err != nil {
		t.Fatalf("Complete with the largest result: %v", err)
	}
	done := e.wantStatus(id, job.Succeeded)
	if string(done.Result) != string(result) || string(done.Input) != string(input) {
		t.Fatal("input or result did not come back byte for byte")
	}
	e.wantLeases(w.WorkerID, 0)

	// Its outcome's delivery, with the longest error, is recorded on it too.
	if _, err := e.st.RelayJob(e.ctx, &recorder{}, id); err != nil {
		t.Fatal(err)
	}
	due, err := e.st.DueCallbacks(e.ctx, 1)
	if err != nil || len(due) != 1 {
		t.Fatalf("due callbacks = %v, %v", due, err)
	}
	if err := e.st.RecordCallback(e.ctx, due[0], store.CallbackResult{Err: strings.Repeat("e", 4*store.MaxCallbackErrorBytes), NextAt: e.clock.Now().Add(time.Minute)}); err != nil {
		t.Fatalf("record the delivery attempt: %v", err)
	}
	if c := e.job(id).Callback; c == nil || len(c.LastError) != store.MaxCallbackErrorBytes {
		t.Fatalf("callback = %+v", c)
	}
}
