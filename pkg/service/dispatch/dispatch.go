package dispatch

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/job"
	"github.com/fleetq/fleetq/pkg/domain/submission"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
)

// Store is what dispatch needs of the store.
type Store interface {
	CreateJob(ctx context.Context, n job.Spec) (job.Job, bool, error)
	RecordRejection(ctx context.Context, r submission.Rejection) error
}

// Waker raises a fleet's capacity when work arrives for it (wake on enqueue):
// jobs is how many jobs the batch created for the fleet.
type Waker interface {
	Wake(ctx context.Context, fleet string, jobs int) error
}

// Handler is the dispatch function's logic. Build it with New.
type Handler struct {
	cfg   *fleetconfig.Config
	store Store
	waker Waker
	log   *slog.Logger
}

// Config holds the handler's optional settings; the zero Config is the
// defaults.
type Config struct {
	// Waker, when set, is called once per fleet per batch that created
	// work, after the batch's jobs are stored (default: none, the scaler's
	// next tick raises the fleet).
	Waker Waker
}

// New returns the dispatch handler over the stage's config and store. Every
// argument but the Config is required: New answers an error naming the one
// missing.
func New(cfg *fleetconfig.Config, st Store, log *slog.Logger, c Config) (*Handler, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("dispatch.New: no config")
	case st == nil:
		return nil, errors.New("dispatch.New: no store")
	case log == nil:
		return nil, errors.New("dispatch.New: no logger")
	}
	return &Handler{cfg: cfg, store: st, waker: c.Waker, log: log}, nil
}

// Handle processes one SQS batch.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	log := h.log
	var resp events.SQSEventResponse
	created := map[string]int{}
	// perTenant counts the batch's jobs per fleet and tenant: a tenant with
	// a max_leased cap wakes its fleet for at most its cap of them, the
	// work that can run (docs/scaling.md, "Caps").
	perTenant := map[[2]string]int{}
	var order []string
	for _, rec := range ev.Records {
		fleet, tenant, err := h.record(ctx, log, rec)
		if err != nil {
			log.ErrorContext(ctx, "dispatch record failed; SQS will redeliver it", "message_id", rec.MessageId, "error", err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			continue
		}
		if fleet != "" {
			if _, seen := created[fleet]; !seen {
				order = append(order, fleet)
				created[fleet] = 0
			}
			k := [2]string{fleet, tenant}
			perTenant[k]++
			if c := h.cfg.Tenant(tenant).MaxLeased; c == 0 || perTenant[k] <= c {
				created[fleet]++
			}
		}
	}
	if h.waker != nil {
		for _, fleet := range order {
			// Waking is best effort here: the jobs are stored, and the
			// scaler's next tick raises capacity if this call failed.
			if err := h.waker.Wake(ctx, fleet, created[fleet]); err != nil {
				log.WarnContext(ctx, "wake fleet", "fleet", fleet, "error", err.Error())
			}
		}
	}
	return resp, nil
}

// record creates the job of one message. It answers the fleet that got new
// work ("" for none) and the job's tenant, or an error worth a redelivery.
func (h *Handler) record(ctx context.Context, log *slog.Logger, rec events.SQSMessage) (string, string, error) {
	sub, err := submission.Parse([]byte(rec.Body), h.cfg)
	var invalid *submission.Error
	if errors.As(err, &invalid) {
		log.WarnContext(ctx, "submission rejected", "message_id", rec.MessageId, "reason", invalid.Msg)
		return "", "", h.store.RecordRejection(ctx, submission.Rejection{MessageID: rec.MessageId, Source: "sqs", Reason: invalid.Msg, Body: rec.Body})
	}
	if err != nil {
		return "", "", err
	}
	if sub.JobID == "" {
		// Sent straight to the queue without an id: the message id is stable
		// across redeliveries of the same message.
		sub.JobID = rec.MessageId
	}
	// The API queues a job under its full id, having recorded it as
	// accepted: filing that record is tried first. A job_id without the
	// tenant (sent straight to the queue, or queued by a release before
	// tenant-scoped ids) is created.
	spec := sub.Spec()
	spec.Accepted = tenant.KeyOf(sub.TenantID, sub.JobID) != ""
	j, created, err := h.store.CreateJob(ctx, spec)
	if err != nil {
		return "", "", err
	}
	if !created {
		log.InfoContext(ctx, "duplicate submission ignored", "job_id", j.ID, "message_id", rec.MessageId, "status", j.Status)
		return "", "", nil
	}
	log.InfoContext(ctx, "job created", "job_id", j.ID, "fleet", j.FleetSlug, "workflow_id", j.WorkflowID, "tenant_id", j.TenantID)
	return j.FleetSlug, j.TenantID, nil
}
