// Package upgrade tests the compatibility promise (docs/deploy.md,
// "Compatibility") against the previous release itself: the release
// releases.txt names last, built from the repository's own history, its
// real `fleetq dev` and `fleetq worker` binaries running on one table,
// queue and bucket with today's dev stack and today's `fleetq worker`. The
// fixtures of testdata/release-<version>/ (pkg/aws/store, pkg/domain/wire,
// infra) stay as the fast checks; this package is the slow one. It holds
// only tests.
package upgrade
