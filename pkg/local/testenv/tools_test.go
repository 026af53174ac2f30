package testenv_test

import (
	"testing"

	"github.com/fleetq/fleetq/pkg/local/testenv"
)

// fakeTB records how a test ended; Fatalf and Skip stop the goroutine as
// the testing package's do.
type fakeTB struct {
	testing.TB
	failed, skipped bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true; panic(f) }
func (f *fakeTB) Skip(...any)           { f.skipped = true; panic(f) }
func (f *fakeTB) run(fn func(testing.TB)) *fakeTB {
	func() {
		defer func() {
			if r := recover(); r != nil && r != f {
				panic(r)
			}
		}()
		fn(f)
	}()
	return f
}

func TestUnavailableSkipsOutsideCIAndFailsUnderIt(t *testing.T) {
	for _, c := range []struct {
		ci         string
		fail, skip bool
	}{
		{"", false, true},
		{"false", false, true},
		{"0", false, true},
		{"true", true, false},
		{"1", true, false},
	} {
		t.Setenv(testenv.EnvCI, c.ci)
		f := (&fakeTB{}).run(func(tb testing.TB) { testenv.Unavailable(tb, "python3 is not installed") })
		if f.failed != c.fail || f.skipped != c.skip {
			t.Errorf("CI=%q: failed %v, skipped %v; want failed %v, skipped %v", c.ci, f.failed, f.skipped, c.fail, c.skip)
		}
	}
}
