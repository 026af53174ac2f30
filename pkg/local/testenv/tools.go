package testenv

import (
	"os"
	"testing"
)

// EnvCI is set by CI systems, and by .ci/run when its caller has not.
const EnvCI = "CI"

// OnCI reports whether the tests run under CI: EnvCI set, and not to false
// or 0.
func OnCI() bool {
	v := os.Getenv(EnvCI)
	return v != "" && v != "false" && v != "0"
}

// Unavailable ends a test that cannot run here because a tool it needs is
// missing (npm, python3, Chromium, dynalite): it skips the test saying why,
// and fails it under CI, where .ci/run and make test install every tool, so
// that no test passes there by not running.
func Unavailable(tb testing.TB, why string) {
	tb.Helper()
	if OnCI() {
		tb.Fatalf("%s (%s=%s: every tool the tests need must be installed)", why, EnvCI, os.Getenv(EnvCI))
	}
	tb.Skip(why)
}
