package api

import (
	"net/http"

	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/service/console"
)

// Auth is the credential a route requires.
type Auth string

// The credentials of the API's routes.
const (
	// AuthFleetSecret is registration's proof of membership: an attested
	// AWS identity in the body (aws_identity), or the fleet's own secret in
	// the X-Fleet-Secret header (fleets with accept_secret).
	AuthFleetSecret Auth = "attested identity or fleet secret"
	// AuthWorker is a worker token as Authorization: Bearer <token>.
	AuthWorker Auth = "worker token"
	// AuthOperator is the operator credential: IAM (SigV4) in AWS, a bearer
	// token elsewhere. A tenant's credential is refused.
	AuthOperator Auth = "operator credential"
	// AuthProducer is a producer's credential, which acts for one tenant:
	// a tenant's API key (Authorization: Bearer fqk1.…), or IAM (SigV4) as
	// a principal the stage config or the table (POST
	// /api/admin/principals) maps to a tenant; or the operator credential,
	// for every tenant.
	AuthProducer Auth = "producer credential"
	// AuthConsole is the operator console's session cookie, signed by the
	// API and obtained with the operator credential (POST
	// /api/admin/console-session); its forms also carry a CSRF token.
	AuthConsole Auth = "console session"
	// AuthConsoleLogin is the signed, short-lived login token of GET
	// /console/login, exchanged there for the console session.
	AuthConsoleLogin Auth = "console login"
)

// Route is one method and path pattern the API serves, and the credential
// it requires.
type Route struct {
	Method  string
	Pattern string
	Auth    Auth
}

type handler func(*server, http.ResponseWriter, *http.Request)

// routes is the router's table: New serves exactly these.
var routes = []struct {
	Route
	handle handler
}{
	{Route{http.MethodPost, wire.PathRegister, AuthFleetSecret}, (*server).register},
	{Route{http.MethodPost, wire.PathPoll, AuthWorker}, (*server).poll},
	{Route{http.MethodPost, wire.PathHeartbeat, AuthWorker}, (*server).heartbeat},
	{Route{http.MethodPost, wire.PathComplete, AuthWorker}, (*server).complete},
	{Route{http.MethodPost, wire.PathFail, AuthWorker}, (*server).fail},
	{Route{http.MethodPost, wire.PathRequeue, AuthWorker}, (*server).requeue},
	{Route{http.MethodPost, wire.PathDeregister, AuthWorker}, (*server).deregister},
	{Route{http.MethodPost, wire.PathUnhealthy, AuthWorker}, (*server).unhealthy},
	{Route{http.MethodPost, wire.PathBootReport, AuthFleetSecret}, (*server).bootReport},

	{Route{http.MethodPost, wire.PathJobs, AuthProducer}, (*server).submit},
	{Route{http.MethodGet, wire.PathJobs, AuthProducer}, (*server).listOwnJobs},
	{Route{http.MethodGet, wire.PathJob, AuthProducer}, (*server).getJob},
	{Route{http.MethodGet, wire.PathJobWait, AuthProducer}, (*server).waitJob},
	{Route{http.MethodPost, wire.PathJobCancel, AuthProducer}, (*server).cancel},
	{Route{http.MethodGet, wire.PathJobLogs, AuthProducer}, (*server).jobLogs},
	{Route{http.MethodPost, wire.PathUploads, AuthProducer}, (*server).upload},

	{Route{http.MethodGet, wire.PathAdminFleets, AuthOperator}, (*server).fleets},
	{Route{http.MethodGet, wire.PathAdminWorkers, AuthOperator}, (*server).workers},
	{Route{http.MethodPost, wire.PathAdminWorkerAction, AuthOperator}, (*server).workerAction},
	{Route{http.MethodGet, wire.PathAdminJobs, AuthOperator}, (*server).adminJobs},
	{Route{http.MethodPost, wire.PathAdminJobRetry, AuthOperator}, (*server).retryJob},
	{Route{http.MethodGet, wire.PathAdminRejected, AuthOperator}, (*server).rejected},
	{Route{http.MethodGet, wire.PathAdminCosts, AuthOperator}, (*server).costs},
	{Route{http.MethodPost, wire.PathAdminKeys, AuthOperator}, (*server).createKey},
	{Route{http.MethodGet, wire.PathAdminKeys, AuthOperator}, (*server).listKeys},
	{Route{http.MethodPost, wire.PathAdminKeyRevoke, AuthOperator}, (*server).revokeKey},
	{Route{http.MethodPost, wire.PathAdminPrincipals, AuthOperator}, (*server).mapPrincipal},
	{Route{http.MethodGet, wire.PathAdminPrincipals, AuthOperator}, (*server).listPrincipals},
	{Route{http.MethodPost, wire.PathAdminPrincipalRemove, AuthOperator}, (*server).removePrincipal},
	{Route{http.MethodPost, wire.PathAdminConsoleSession, AuthOperator}, (*server).consoleSession},
	{Route{http.MethodDelete, wire.PathAdminConsoleSession, AuthOperator}, (*server).endConsoleSessions},
}

// The operator console's pages and forms (pkg/service/console) are routes of
// the API too: the console checks its own session.
func init() {
	for _, r := range console.Routes() {
		a := AuthConsole
		if r.Pattern == console.PathLogin {
			a = AuthConsoleLogin
		}
		routes = append(routes, struct {
			Route
			handle handler
		}{Route{r.Method, r.Pattern, a}, (*server).serveConsole})
	}
}

// Routes lists every route the API serves, in the router's order.
func Routes() []Route {
	out := make([]Route, len(routes))
	for i, r := range routes {
		out[i] = r.Route
	}
	return out
}

// bind gives a route's handler its server and its credential check. The
// register handler checks the fleet secret itself, after the rate limit.
func (s *server) bind(a Auth, h handler) http.HandlerFunc {
	f := func(w http.ResponseWriter, r *http.Request) { h(s, w, r) }
	switch a {
	case AuthWorker:
		return s.worker(f)
	case AuthOperator:
		return s.operator(f)
	case AuthProducer:
		return s.producer(f)
	default:
		return f
	}
}
