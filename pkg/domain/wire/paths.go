package wire

// The API's paths. A {name} segment is a path parameter (net/http's
// pattern syntax), which a client replaces with the escaped value.
const (
	PathRegister          = "/api/worker/register"
	PathPoll              = "/api/worker/poll"
	PathHeartbeat         = "/api/worker/heartbeat"
	PathComplete          = "/api/worker/complete"
	PathFail              = "/api/worker/fail"
	PathRequeue           = "/api/worker/requeue"
	PathDeregister        = "/api/worker/deregister"
	PathUnhealthy         = "/api/worker/unhealthy"
	PathBootReport        = "/api/worker/boot-report"
	PathJobs              = "/api/jobs"
	PathJob               = "/api/jobs/{job_id}"
	PathJobCancel         = "/api/jobs/{job_id}/cancel"
	PathJobLogs           = "/api/jobs/{job_id}/logs"
	PathJobWait           = "/api/jobs/{job_id}/wait"
	PathUploads           = "/api/uploads"
	PathAdminFleets       = "/api/admin/fleets"
	PathAdminWorkers      = "/api/admin/workers"
	PathAdminWorkerAction = "/api/admin/workers/{worker_id}/{action}"
	PathAdminJobs         = "/api/admin/jobs"
	PathAdminJobRetry     = "/api/admin/jobs/{job_id}/retry"
	PathAdminRejected     = "/api/admin/rejected"
	PathAdminCosts        = "/api/admin/costs"
)

// PathAdminConsoleSession exchanges the operator credential for a signed
// operator console login (POST, fleetq console), or ends every console
// session of the operator (DELETE, fleetq console --sign-out-everywhere).
const PathAdminConsoleSession = "/api/admin/console-session"

// HeaderFleetSecret carries a fleet's secret on a registration by secret
// (fleets whose config accepts one: the dev stack, workers outside AWS).
const HeaderFleetSecret = "X-Fleet-Secret"

// HeaderIdentity carries an attested registration's signed identity
// request (EncodeIdentity).
const HeaderIdentity = "X-Fleetq-Identity"

// HeaderServerID is signed into an attested registration's identity
// request and names the stage it is for, so a request signed for one stage
// is refused by every other.
const HeaderServerID = "X-Fleetq-Server-Id"

// MaxWaitSeconds is the longest GET /api/jobs/{job_id}/wait holds a
// request (its query seconds): inside API Gateway's 30-second integration
// timeout.
const MaxWaitSeconds = 25
