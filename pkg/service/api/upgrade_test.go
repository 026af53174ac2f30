package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/local/devstack"
)

// The release before tenant-scoped job ids (commit 72ed7cb) wrote, for a
// submission {"job_id": "render-7", "tenant_id": "acme", ...}:
//   - the job under its job_id alone, JOB#render-7, carrying tenant_id;
//   - for a tenant with a max_queued cap, at submit a reservation
//     RESERVATION#render-7 (tenant_id acme) with the count TENANT#acme
//     raised by one, which its dispatch deleted as it created the job with
//     tenant_slot;
//   - on the submission queue, the submission as the producer sent it,
//     job_id without the tenant.
// The helpers below write those items as its store wrote them (its
// jobItem's attributes, its key functions, its ready queue Q#<fleet>),
// and that message as its API queued it.

// v010HistoryEntry and v010Job are 72ed7cb's job item as it marshaled one
// (pkg/aws/store/jobs.go there), queued and never leased.
type v010HistoryEntry struct {
	At     time.Time `dynamodbav:"at"`
	To     string    `dynamodbav:"to"`
	Reason string    `dynamodbav:"reason,omitempty"`
}

type v010Job struct {
	PK, SK          string
	GSI1PK, GSI1SK  string
	Type            string             `dynamodbav:"type"`
	JobID           string             `dynamodbav:"job_id"`
	TenantID        string             `dynamodbav:"tenant_id"`
	WorkflowID      string             `dynamodbav:"workflow_id"`
	Fleet           string             `dynamodbav:"fleet"`
	Status          string             `dynamodbav:"status"`
	Priority        int                `dynamodbav:"priority"`
	Attempts        int                `dynamodbav:"attempts"`
	MaxAttempts     int                `dynamodbav:"max_attempts"`
	Preemptions     int                `dynamodbav:"preemptions"`
	MaxPreemptions  int                `dynamodbav:"max_preemptions"`
	TimeoutS        int                `dynamodbav:"timeout_s"`
	QueueTimeoutS   int                `dynamodbav:"queue_timeout_s"`
	Input           string             `dynamodbav:"input,omitempty"`
	CreatedMS       int64              `dynamodbav:"created_ms"`
	UpdatedMS       int64              `dynamodbav:"updated_ms"`
	NotBeforeMS     int64              `dynamodbav:"not_before_ms"`
	QueueDeadlineMS int64              `dynamodbav:"queue_deadline_ms"`
	RunDeadlineMS   int64              `dynamodbav:"run_deadline_ms"`
	Reason          string             `dynamodbav:"reason,omitempty"`
	TenantSlot      bool               `dynamodbav:"tenant_slot,omitempty"`
	History         []v010HistoryEntry `dynamodbav:"history"`
}

// putV010Job writes a queued job of the tenant as 72ed7cb's CreateJob did
// in fleet gpu.
func (h *harness) putV010Job(id, tenantID string, slot bool) {
	h.t.Helper()
	now := time.Now().UTC()
	at := now.Format("20060102T150405.000Z")
	it := v010Job{PK: "JOB#" + id, SK: "JOB", GSI1PK: "Q#gpu", GSI1SK: "1000#" + at + "#" + id, Type: "job",
		JobID: id, TenantID: tenantID, WorkflowID: "wf-a", Fleet: "gpu", Status: "queued", MaxAttempts: 2, MaxPreemptions: 5,
		TimeoutS: 5400, Input: `{"n":1}`, CreatedMS: now.UnixMilli(), UpdatedMS: now.UnixMilli(), NotBeforeMS: now.UnixMilli(),
		Reason: "created", TenantSlot: slot, History: []v010HistoryEntry{{At: now, To: "queued", Reason: "created"}}}
	h.putItem(it)
}

// putV010Reservation writes what 72ed7cb's ReserveTenantSlot wrote for a
// submission of a capped tenant: the reservation under the bare job_id and
// the tenant's count raised by one.
func (h *harness) putV010Reservation(id, tenantID string) {
	h.t.Helper()
	now := time.Now()
	h.putItem(map[string]any{"PK": "RESERVATION#" + id, "SK": "RESERVATION", "type": "reservation", "job_id": id, "tenant_id": tenantID,
		"at_ms": now.UnixMilli(), "ttl": now.Add(15 * 24 * time.Hour).Unix()})
	_, err := h.stack.DynamoDB.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(h.stack.Table),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "TENANT#" + tenantID},
			"SK": &types.AttributeValueMemberS{Value: "COUNTS"}},
		UpdateExpression:          aws.String("SET #open = if_not_exists(#open, :zero) + :one"),
		ExpressionAttributeNames:  map[string]string{"#open": "open"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":zero": &types.AttributeValueMemberN{Value: "0"}, ":one": &types.AttributeValueMemberN{Value: "1"}},
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// queueV010Submission puts a submission on the queue as 72ed7cb's API did:
// the body as the producer sent it, job_id without the tenant.
func (h *harness) queueV010Submission(id, tenantID string) {
	h.t.Helper()
	body, _ := json.Marshal(map[string]any{"job_id": id, "tenant_id": tenantID, "workflow_id": "wf-a", "priority": 0, "input": map[string]any{"n": 1}})
	if _, err := h.stack.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(h.stack.QueueURL), MessageBody: aws.String(string(body))}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) putItem(v any) {
	h.t.Helper()
	av, err := attributevalue.MarshalMap(v)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.stack.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(h.stack.Table), Item: av}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) itemExists(pk, sk string) bool {
	h.t.Helper()
	out, err := h.stack.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(h.stack.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: sk}}})
	if err != nil {
		h.t.Fatal(err)
	}
	return out.Item != nil
}

func (h *harness) openJobs(tenantID string) int {
	h.t.Helper()
	n, err := h.stack.Store.TenantOpenJobs(context.Background(), tenantID)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestJobsOfThePreviousReleaseAreFoundByTheirTenant: a producer's
// credential reads and cancels its tenant's jobs stored under their bare
// ids, by that id and by the tenant-scoped one; another tenant's are not
// found; the listing shows them with the tenant's new jobs.
func TestJobsOfThePreviousReleaseAreFoundByTheirTenant(t *testing.T) {
	t.Parallel()
	h := newManualHarness(t)
	acmeKey, _ := h.createKey("acme", nil)
	for i := range 3 {
		h.putV010Job(fmt.Sprintf("render-%d", i), "acme", false)
	}
	h.putV010Job("globex-old", "globex", false)
	for _, p := range []string{"render-0", "acme:render-0"} {
		r := h.do("GET", "/api/jobs/"+p, acmeKey, nil)
		if r.status != 200 || r.body["job_id"] != "render-0" || r.body["tenant_id"] != "acme" || r.body["status"] != "queued" {
			t.Fatalf("acme's GET %s: %d %s", p, r.status, r.raw)
		}
	}
	for _, p := range []string{"globex-old", "acme:globex-old"} {
		h.want(h.do("GET", "/api/jobs/"+p, acmeKey, nil), 404, "not_found")
		h.want(h.do("POST", "/api/jobs/"+p+"/cancel", acmeKey, nil), 404, "not_found")
	}
	h.want(h.do("GET", "/api/jobs/render-0", "", nil), 401, "unauthenticated")
	if r := h.do("POST", "/api/jobs/render-1/cancel", acmeKey, nil); r.status != 200 || r.body["status"] != "canceled" {
		t.Fatalf("acme's cancel of its old job: %d %s", r.status, r.raw)
	}
	if j := h.job("render-1"); j["status"] != "canceled" {
		t.Fatalf("the old job after the cancel: %v", j)
	}
	h.want(h.do("POST", "/api/jobs", acmeKey, map[string]any{"job_id": "new-1", "workflow_id": "wf-a"}), 202, "")
	h.dispatch()
	r := h.do("GET", "/api/admin/jobs?status=queued", "op", nil)
	for _, id := range []string{`"render-0"`, `"render-2"`, `"acme:new-1"`} {
		if !strings.Contains(string(r.raw), id) {
			t.Fatalf("the queued listing lacks %s: %s", id, r.raw)
		}
	}
}

// TestResubmittingAJobOfThePreviousReleaseRunsItOnce: the same job_id and
// body sent again after the upgrade, through the API or as the previous
// release's queued message redelivered, is the job the previous release
// created; no second job is made.
func TestResubmittingAJobOfThePreviousReleaseRunsItOnce(t *testing.T) {
	t.Parallel()
	h := newManualHarness(t)
	acmeKey, _ := h.createKey("acme", nil)
	token := h.register("w1", "gpu")
	h.putV010Job("render-7", "acme", false)
	r := h.do("POST", "/api/jobs", acmeKey, map[string]any{"job_id": "render-7", "workflow_id": "wf-a", "input": map[string]any{"n": 1}})
	h.want(r, 202, "")
	if r.body["job_id"] != "render-7" {
		t.Fatalf("the resubmission answered %s, want the previous release's job render-7", r.raw)
	}
	h.queueV010Submission("render-7", "acme")
	h.dispatch()
	h.want(h.do("GET", "/api/jobs/acme:render-7", "op", nil), 404, "not_found")
	if l, r := h.poll(token); r.status != 200 || l.id != "render-7" {
		t.Fatalf("poll: %d %s", r.status, r.raw)
	}
	if _, r := h.poll(token); r.status != 204 {
		t.Fatalf("a second job was leased: %d %s", r.status, r.raw)
	}
}

// TestTenantSlotsReservedByThePreviousReleaseAreTakenOver: a capped
// tenant's submission accepted by the previous release (its slot reserved
// under the bare job_id, its message on the queue) and dispatched after
// the upgrade takes over that slot: the count does not grow, the
// reservation is gone, and the job's end gives the slot back.
func TestTenantSlotsReservedByThePreviousReleaseAreTakenOver(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *devstack.Options) {
		o.ManualDispatch, o.RelayInterval = true, -1
		cfg := *o.Config
		cfg.Tenants = append(append([]fleetconfig.Tenant{}, cfg.Tenants...), fleetconfig.Tenant{ID: "capped", MaxQueued: 2})
		o.Config = &cfg
	})
	token := h.register("w1", "gpu")
	h.putV010Reservation("pending", "capped")
	h.queueV010Submission("pending", "capped")
	if h.openJobs("capped") != 1 {
		t.Fatalf("open before dispatch = %d", h.openJobs("capped"))
	}
	h.dispatch()
	if j := h.job("capped:pending"); j["status"] != "queued" {
		t.Fatalf("the job after dispatch: %v", j)
	}
	if n := h.openJobs("capped"); n != 1 || h.itemExists("RESERVATION#pending", "RESERVATION") {
		t.Fatalf("after dispatch: open %d, reservation left %v; want 1 and none", n, h.itemExists("RESERVATION#pending", "RESERVATION"))
	}
	l, r := h.poll(token)
	if r.status != 200 || l.id != "capped:pending" {
		t.Fatalf("poll: %d %s", r.status, r.raw)
	}
	h.want(h.do("POST", "/api/worker/complete", token, map[string]any{"job_id": l.id, "lease_token": l.token, "result": map[string]any{}}), 200, "")
	if _, err := h.stack.Relay.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := h.openJobs("capped"); n != 0 {
		t.Fatalf("open after the job's end = %d, want 0", n)
	}
	// Both slots of the cap are free again.
	for _, id := range []string{"a", "b"} {
		h.want(h.do("POST", "/api/jobs", "op", map[string]any{"job_id": id, "tenant_id": "capped", "workflow_id": "wf-a"}), 202, "")
	}
}
