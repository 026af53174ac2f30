// Package system is fleetq's composition root: the one place that turns an
// environment into the four functions (API, dispatch, scaler, interruption
// handler). The Lambda mains load their environment with LoadLambda and the
// dev stack builds an Env from its embedded servers; both then call the same
// constructors, so a dependency wired for one is wired for the other.
//
// This package holds what every function shares: the Env (system.go), the
// Lambda environment and the clients of more than one function (lambda.go),
// and the start of a function (start.go). Each function's own wiring, its
// service's constructor and its handler, is a package of its own beside it
// (apifn, dispatchfn, scalerfn, interruptionfn), so that a function's main
// links only the services it calls.
package system
