// Package wire is the one definition of fleetq's HTTP contract: the paths,
// every request and response body, the error codes and the error body. The
// API server (pkg/service/api), the worker agent (pkg/service/agent) and the CLI
// (cmd/fleetq) all encode and decode through these types, so a field renamed
// here is renamed for every side at once and the sides cannot drift apart.
// It depends on nothing but the standard library; docs/api.md describes it.
package wire
