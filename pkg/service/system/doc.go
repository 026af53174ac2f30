// Package system is fleetq's composition root: the one place that turns an
// environment into the four functions (API, dispatch, scaler, interruption
// handler). The Lambda mains load their environment with LoadLambda and the
// dev stack builds an Env from its embedded servers; both then call the same
// constructors, so a dependency wired for one is wired for the other.
package system
