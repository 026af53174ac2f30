// Package version holds the version stamped into every fleetq binary at
// build time, so the control plane and the agents it ships can say which
// build they are and the API can tell an agent of another build.
package version
