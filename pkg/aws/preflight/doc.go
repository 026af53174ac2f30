// Package preflight checks that an AWS account and region can run a fleetq
// stage before (and after) it is deployed: credentials, the CDK bootstrap,
// the EC2 vCPU quotas the fleets need, the fleets' AMIs, the own secret of each
// fleet that accepts one, and the API. It only reads; `fleetq doctor` prints its results.
package preflight
