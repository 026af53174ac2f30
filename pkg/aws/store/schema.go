package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetq/fleetq/pkg/domain/fleetstate"
	"github.com/fleetq/fleetq/pkg/domain/job"
)

// Table layout. The CDK app and the local stack create the table from these
// names, so code and infrastructure cannot drift apart.
const (
	AttrPK  = "PK"
	AttrSK  = "SK"
	AttrTTL = "ttl"

	// IndexByState (GSI1) groups jobs by fleet and state, and workers by fleet.
	IndexByState = "by-state"
	AttrGSI1PK   = "GSI1PK"
	AttrGSI1SK   = "GSI1SK"

	// IndexByInstance (GSI2) finds a worker by its EC2 instance id.
	IndexByInstance = "by-instance"
	AttrGSI2PK      = "GSI2PK"
	AttrGSI2SK      = "GSI2SK"
)

// Attribute names, as conditions and updates spell them. The item structs
// (jobItem, workerItem, fleetItem, eventItem) carry the same names in their
// dynamodbav tags, which cannot refer to constants.
const (
	// Jobs (and the fields events copy from them).
	attrType            = "type"
	attrJobID           = "job_id"
	attrTenantID        = "tenant_id"
	attrWorkflowID      = "workflow_id"
	attrFleet           = "fleet"
	attrStatus          = "status"
	attrPriority        = "priority"
	attrAttempts        = "attempts"
	attrMaxAttempts     = "max_attempts"
	attrPreemptions     = "preemptions"
	attrMaxPreemptions  = "max_preemptions"
	attrOnDemandOnly    = "on_demand_only"
	attrTimeoutS        = "timeout_s"
	attrQueueTimeoutS   = "queue_timeout_s"
	attrInput           = "input"
	attrResult          = "result"
	attrError           = "error"
	attrErrorCode       = "error_code"
	attrCreatedMS       = "created_ms"
	attrUpdatedMS       = "updated_ms"
	attrNotBeforeMS     = "not_before_ms"
	attrFirstLeasedMS   = "first_leased_ms"
	attrLeasedMS        = "leased_ms"
	attrLeaseExpiresMS  = "lease_expires_ms"
	attrQueueDeadlineMS = "queue_deadline_ms"
	attrRunDeadlineMS   = "run_deadline_ms"
	attrHeartbeatMS     = "heartbeat_ms"
	attrLeaseToken      = "lease_token"
	attrWorkerID        = "worker_id"
	attrProgress        = "progress"
	attrReason          = "reason"
	attrCancelRequested = "cancel_requested"
	attrHistory         = "history"
	attrCallbackURL     = "callback_url"
	attrCallback        = "callback"

	// Callbacks waiting for delivery (callbacks.go).
	attrNextMS    = "next_ms"
	attrLastError = "last_error"

	// Workers.
	attrStage          = "stage"
	attrInstanceID     = "instance_id"
	attrInstanceType   = "instance_type"
	attrAZ             = "az"
	attrPurchase       = "purchase"
	attrCapabilities   = "capabilities"
	attrProviders      = "providers"
	attrMaxConcurrency = "max_concurrency"
	attrTokenHash      = "token_hash"
	attrAgentKeyHash   = "agent_key_hash"
	attrWorkerStatus   = "wstatus"
	attrApproved       = "approved"
	attrLeases         = "leases"
	attrRegisteredMS   = "registered_ms"
	attrLastSeenMS     = "last_seen_ms"
	attrLastReleaseMS  = "last_release_ms"
	attrLastClaimMS    = "last_claim_ms"
	attrFirstClaimMS   = "first_claim_ms"
	attrBootLaunchMS   = "boot_launch_ms"
	attrBootAgentMS    = "boot_agent_ms"
	attrBootReadyMS    = "boot_ready_ms"
	attrBootWarmMS     = "boot_warm_ms"
	attrBootFromPool   = "boot_from_pool"
	attrBootSpotPool   = "boot_spot_pool"
	attrSourceIP       = "source_ip"
	attrAgentVersion   = "agent_version"

	// Fleet state.
	attrWorkers        = "workers"
	attrDesired        = "desired"
	attrInService      = "in_service"
	attrLastActiveMS   = "last_active_ms"
	attrLastDecision   = "last_decision"
	attrFirstSeen      = "first_seen"
	attrForecastHours  = "forecast_hours"
	attrForecastBudget = "forecast_budget"
	attrForecastMS     = "forecast_ms"
	attrBootsMS        = "boots_ms"
	attrWokenMS        = "woken_ms"
	attrDecisionSeq    = "decision_seq"

	// Counters: registration windows and interruption buckets.
	attrCount = "count"

	// Tenant quotas: a tenant's open jobs, and whether a job is counted in them.
	attrOpen       = "open"
	attrLeasedJobs = "leased"
	attrChangedMS  = "changed_ms"
	attrTenantSlot = "tenant_slot"

	// API keys.
	attrRevokedMS  = "revoked_ms"
	attrLastUsedMS = "last_used_ms"

	// Cost per job: the job's price, and the hourly totals.
	attrCostUSD      = "cost_usd"
	attrCostJobs     = "jobs"
	attrCostUnpriced = "unpriced"
	attrCostMicroUSD = "micro_usd"

	// Console sessions: an operator's session epoch (console.go).
	attrEpoch = "epoch"
)

// attrLeaseExpiresMS is a lease's expiry as the by-state index files it
// (the claim's, or the sweep's refiling, lease.go); attrLeaseUntilMS is the
// live expiry a heartbeat extends, kept out of every index so that a
// heartbeat writes the job item only. A lease runs out when both have
// passed (jobItem.leaseExpires).
const attrLeaseUntilMS = "lease_until_ms"

// attrLeaseAuth is the digest of the token the lease holder acted with when
// it took the lease (or last proved, report.go): a heartbeat is one write of
// the job item, so the worker's current token is checked there, in the same
// conditional write, and not only on the worker item. Kept out of every index.
const attrLeaseAuth = "lease_auth"

// ByStateProjection lists the non-key attributes copied into IndexByState:
// enough to choose candidates and count work without reading whole items
// (job inputs and results stay out of the index).
var ByStateProjection = []string{
	attrJobID, attrTenantID, attrWorkflowID, attrStatus, attrPriority, attrAttempts, attrMaxAttempts,
	attrPreemptions, attrWorkerID, attrLeaseToken, attrLeaseExpiresMS, attrNotBeforeMS,
	attrCreatedMS, attrUpdatedMS, attrFirstLeasedMS, attrQueueTimeoutS, attrTimeoutS, attrLeasedMS,
	attrReason, attrErrorCode, attrOnDemandOnly,
	attrFleet, attrInstanceID, attrInstanceType, attrAZ, attrWorkerStatus, attrApproved, attrLeases,
	attrMaxConcurrency, attrLastSeenMS, attrRegisteredMS, attrLastReleaseMS, attrLastClaimMS,
	attrAgentVersion,
}

// ByInstanceProjection lists the non-key attributes copied into IndexByInstance.
var ByInstanceProjection = []string{attrWorkerID, attrFleet}

// CreateTableInput describes the table for the local stack and the tests
// (on-demand billing; the CDK app declares the same keys and indexes).
func CreateTableInput(table string) *dynamodb.CreateTableInput {
	str := func(name string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS}
	}
	keys := func(pk, sk string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
		}
	}
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{str(AttrPK), str(AttrSK), str(AttrGSI1PK), str(AttrGSI1SK), str(AttrGSI2PK), str(AttrGSI2SK)},
		KeySchema:            keys(AttrPK, AttrSK),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{
				IndexName:  aws.String(IndexByState),
				KeySchema:  keys(AttrGSI1PK, AttrGSI1SK),
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: ByStateProjection},
			},
			{
				IndexName:  aws.String(IndexByInstance),
				KeySchema:  keys(AttrGSI2PK, AttrGSI2SK),
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: ByInstanceProjection},
			},
		},
	}
}

// Key prefixes and fixed sort keys. Every item's key is built below from
// these; docs/data-model.md lays the table out.
const (
	prefixJob          = "JOB#"
	sortJob            = "JOB"
	prefixWorker       = "WORKER#"
	sortWorker         = "WORKER"
	prefixFleet        = "FLEET#"
	sortFleetState     = "STATE"
	sortSpotPrices     = "SPOT"
	prefixBootReport   = "BOOT#"
	prefixRate         = "RATE#"
	prefixRateWindow   = "W#"
	partitionRejected  = "REJECTED"
	prefixInterrupts   = "INTR#"
	prefixInterruptEvt = "EVT#"
	prefixEvent        = "EVENT#"
	prefixOutbox       = "OUTBOX#"
	prefixTenant       = "TENANT#"
	sortTenantCounts   = "COUNTS"
	sortTenantLeased   = "LEASED"
	prefixReservation  = "RESERVATION#"
	sortReservation    = "RESERVATION"
	prefixCost         = "COST#"
	prefixCallback     = "HOOK#"
	prefixConsole      = "CONSOLE#"
	// partitionAPIKeys holds every tenant API key, one item per key id:
	// a lookup is one GetItem, a listing one Query.
	partitionAPIKeys = "APIKEY"
	// partitionPrincipals holds the IAM principals an operator mapped to a
	// tenant or to the operators, one item per principal: a producer
	// request's lookup is one GetItem, a listing one Query.
	partitionPrincipals = "PRINCIPAL"

	// Partitions of IndexByState.
	prefixAccepted  = "A#"
	prefixReady     = "Q#"
	prefixDelayed   = "D#"
	prefixLeased    = "L#"
	prefixSucceeded = "S#"
	prefixDead      = "X#"
	prefixCanceled  = "C#"
	prefixWorkers   = "W#"
	// eventsPartition held the outbox's pending events before the outbox
	// moved to its own shards of the table (see outbox.go); entries a
	// previous release wrote are still read from it.
	eventsPartition = "E#"
	// callbacksPartition holds the callbacks waiting for delivery, by due
	// time (see callbacks.go).
	callbacksPartition = "H#"

	// Partition of IndexByInstance.
	prefixInstance = "I#"
)

// Item types (the `type` attribute).
const (
	typeJob    = "job"
	typeWorker = "worker"
	typeEvent  = "event"
	// typeCallback is an outcome waiting for delivery to a callback URL.
	typeCallback  = "callback"
	typeAPIKey    = "apikey"
	typePrincipal = "principal"
)

// Item keys.
func jobKey(id string) (string, string) { return prefixJob + id, sortJob }

// apiKeyKey is a tenant API key, by its public id.
func apiKeyKey(id string) (string, string) { return partitionAPIKeys, id }

// principalKey is an IAM principal's mapping, by its key
// (tenant.Principal.Key: partition, account, kind and lowercased name).
func principalKey(key string) (string, string) { return partitionPrincipals, key }

func workerKey(id string) (string, string) { return prefixWorker + id, sortWorker }

func fleetKey(slug string) (string, string) { return prefixFleet + slug, sortFleetState }

// spotPricesKey is a fleet's current Spot prices (spotprices.go), beside
// its state in the fleet's partition.
func spotPricesKey(slug string) (string, string) { return prefixFleet + slug, sortSpotPrices }

// bootReportKey is an instance's boot report (bootreports.go), in its
// fleet's partition.
func bootReportKey(slug, instanceID string) (string, string) {
	return prefixFleet + slug, prefixBootReport + instanceID
}

// rateWindowKey is a registration source's counter for the minute starting at window.
func rateWindowKey(source string, window time.Time) (string, string) {
	return prefixRate + source, prefixRateWindow + strconv.FormatInt(window.Unix(), 10)
}

// rejectionKey files a rejected submission under one partition, newest last.
func rejectionKey(at time.Time, messageID string) (string, string) {
	return partitionRejected, sortTime(at) + "#" + messageID
}

// interruptionsPartition holds a fleet's interruption buckets and the
// markers of the events counted.
func interruptionsPartition(fleet string) string { return prefixInterrupts + fleet }

// interruptionMarker is the sort key marking an interruption event counted.
func interruptionMarker(eventID string) string { return prefixInterruptEvt + eventID }

// interruptionMinute renders the minute a bucket's sort key starts with.
func interruptionMinute(t time.Time) string {
	return t.UTC().Truncate(time.Minute).Format("20060102T1504")
}

// interruptionBucket is the sort key of one bucket's counter.
func interruptionBucket(at time.Time, kind fleetstate.InterruptionKind, instanceType, az string) string {
	return fmt.Sprintf("%s#%s#%s#%s", interruptionMinute(at), kind, orNone(instanceType), orNone(az))
}

// parseInterruptionBucket reads a bucket's sort key back; ok is false for
// any other item of the partition.
func parseInterruptionBucket(sk string) (c fleetstate.InterruptionCount, ok bool) {
	parts := strings.SplitN(sk, "#", 4)
	if len(parts) != 4 {
		return c, false
	}
	return fleetstate.InterruptionCount{Minute: parts[0], Kind: fleetstate.InterruptionKind(parts[1]), InstanceType: parts[2], AZ: parts[3]}, true
}

// lastInterruptionMinute sorts after every bucket's minute.
const lastInterruptionMinute = "99999999T9999"

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tenantKey is a tenant's counter item (its open jobs), stage-wide.
func tenantKey(tenant string) (string, string) { return prefixTenant + tenant, sortTenantCounts }

// tenantLeasedKey is a capped tenant's counter of leased jobs, stage-wide
// (leasecap.go).
func tenantLeasedKey(tenant string) (string, string) { return prefixTenant + tenant, sortTenantLeased }

// reservationKey marks a submission counted in its tenant's open jobs before
// the dispatch function creates the job.
func reservationKey(jobID string) (string, string) { return prefixReservation + jobID, sortReservation }

// costPartition holds shard n of one UTC day's hourly cost totals. Shard 0
// is COST#<day>, the day's one partition before the totals were sharded.
func costPartition(day time.Time, n int) string {
	p := prefixCost + day.UTC().Format("20060102")
	if n == 0 {
		return p
	}
	return p + "#" + strconv.Itoa(n)
}

// costHour is the sort key prefix of one hour's totals.
func costHour(t time.Time) string { return t.UTC().Format("15") }

// costKey is shard n of the total of one tenant, fleet and workflow in the
// hour of at.
func costKey(at time.Time, n int, fleet, tenant, workflow string) (string, string) {
	return costPartition(at, n), costHour(at) + "#" + fleet + "#" + tenant + "#" + workflow
}

// consoleLoginKey marks a console login nonce used (console.go).
func consoleLoginKey(nonce string) (string, string) { return prefixConsole + "LOGIN#" + nonce, "LOGIN" }

// consoleSessionKey marks a console session ended.
func consoleSessionKey(id string) (string, string) { return prefixConsole + "SESSION#" + id, "ENDED" }

// consoleOperatorKey is an operator's console session epoch.
func consoleOperatorKey(operator string) (string, string) {
	return prefixConsole + "OPERATOR#" + operator, "EPOCH"
}

// eventKey is the partition of a job's pending events as a previous
// release filed them (outbox.go reads them still).
func eventKey(jobID string) string { return prefixEvent + jobID }

// outboxPartition is shard n of the outbox (outbox.go).
func outboxPartition(n int) string { return prefixOutbox + strconv.Itoa(n) }

// outboxSortKey files a job's event in its outbox shard: the job's events
// together, oldest first.
func outboxSortKey(jobID, eventSK string) string { return jobID + "#" + eventSK }

// callbackKey is the partition of a job's callbacks waiting for delivery.
func callbackKey(jobID string) string { return prefixCallback + jobID }

// callbackSortKey orders the callbacks partition by due time.
func callbackSortKey(due time.Time, jobID, eventID string) string {
	return sortTime(due) + "#" + jobID + "#" + eventID
}

// eventSortKey orders a job's events by time and names their type
// ("Job Succeeded" files as <time>#succeeded).
func eventSortKey(at time.Time, eventType string) string {
	return sortTime(at) + "#" + strings.ToLower(strings.TrimPrefix(eventType, "Job "))
}

// Partitions of IndexByState. A job is always in exactly one of them: the
// state changes move it by rewriting GSI1PK/GSI1SK, never by removing them.
func delayedPartition(fleet string) string { return prefixDelayed + fleet }

func instancePartition(inst string) string { return prefixInstance + inst }

// terminalPrefix is the partition prefix of a finished status.
func terminalPrefix(s job.Status) string {
	switch s {
	case job.Succeeded:
		return prefixSucceeded
	case job.Dead:
		return prefixDead
	default:
		return prefixCanceled
	}
}

// sortTime renders t so that string order is time order.
func sortTime(t time.Time) string { return t.UTC().Format("20060102T150405.000Z") }

// readySortKey orders the ready queue: highest priority first, then oldest.
func readySortKey(priority int, created time.Time, id string) string {
	return fmt.Sprintf("%04d#%s#%s", 1000-priority, sortTime(created), id)
}

func timeSortKey(t time.Time, id string) string { return sortTime(t) + "#" + id }

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// TableAdmin is the part of the DynamoDB API that creates tables.
type TableAdmin interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateTable creates the table (for the local stack and tests; the CDK app
// owns it in AWS), turns on TTL where the endpoint supports it, and waits
// until it is active. An existing table is left as it is.
func CreateTable(ctx context.Context, db TableAdmin, table string) error {
	_, err := db.CreateTable(ctx, CreateTableInput(table))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	for {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("describe table %s: %w", table, err)
		}
		// Emulators that create tables synchronously report no status.
		if s := out.Table.TableStatus; s == "" || s == types.TableStatusActive {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	// Best effort: DynamoDB Local and some emulators do not implement TTL.
	_, _ = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrTTL), Enabled: aws.Bool(true)},
	})
	return nil
}

// Pending terminations: one item per instance whose terminate lifecycle
// action is held while its workers drain (PK TERMINATING, SK the instance
// id), read whole by the interruption handler's sweep.
const (
	partitionTerminating = "TERMINATING"
	attrGroup            = "asg"
	attrHook             = "hook"
	attrHookToken        = "hook_token"
	attrStartedMS        = "started_ms"
	attrDeadlineMS       = "deadline_ms"
	// The last heartbeat is attrHeartbeatMS, as for a job's lease.
)

// terminationKey is the key of an instance's pending termination.
func terminationKey(instanceID string) (string, string) { return partitionTerminating, instanceID }
