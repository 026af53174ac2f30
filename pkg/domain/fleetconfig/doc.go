// Package fleetconfig reads and validates the declarative fleet configuration
// of one stage (config/<stage>.yaml): which fleets exist, which workflows each
// serves, and the scaling, lease, retry and instance settings of each. The
// control plane, the local dev stack and the CDK app all read the same file
// through this package, so they can never disagree about a fleet.
package fleetconfig
