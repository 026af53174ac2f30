// Package testenv gives integration tests real AWS SDK clients against the
// embedded servers of pkg/local/localaws, one fresh table or queue per test
// (testenv.go). Setting FLEETQ_TEST_DYNAMODB_ENDPOINT (e.g. to DynamoDB
// Local) runs the same tests against that endpoint instead;
// FLEETQ_TEST_DYNALITE=1 against a dynalite the tests start
// (pkg/local/dynalite). It also holds what tests of several packages share:
// the waits on signals (wait.go), the tools a test needs (tools.go), the
// binaries built as make build ships them (build.go), whether the race
// detector is on (race.go, norace.go), and the recorded agent protocol of
// past releases (transcript.go).
package testenv
