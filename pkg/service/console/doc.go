// Package console is the operator console: server-rendered HTML pages of the
// fleets, workers and jobs, with the cancel, retry and drain buttons, served
// by the API under /console. Browsers cannot sign requests with IAM, so an
// operator exchanges the operator credential for a short-lived signed
// session (fleetq console); the pages then call the same operator code as
// the admin routes.
package console
