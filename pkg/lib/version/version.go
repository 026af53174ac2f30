package version

import (
	"regexp"
	"strconv"
)

// Version is the build's version, set by `make build` and `make release`
// with -ldflags "-X github.com/fleetq/fleetq/pkg/lib/version.Version=v1.2.3"
// (git describe). A binary built without it says Dev.
var Version = Dev

// Dev is the version of a binary built without a stamped version
// (go run, go test).
const Dev = "dev"

// Get returns the stamped version.
func Get() string { return Version }

// Release is a version as `git describe --tags` writes it from a release
// tag: vMAJOR.MINOR.PATCH, then -N-gHASH for a build N commits after the
// tag, then -dirty for a build with uncommitted changes (ignored here).
type Release struct {
	Major, Minor, Patch int
	// Commits is how many commits after the tag the build is (0: the tag).
	Commits int
}

var describe = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)(?:-(\d+)-g[0-9a-f]+)?(?:-dirty)?$`)

// Parse reads a version; ok is false for anything that is not a release
// tag or a build after one (dev, a bare commit hash, a pre-release).
func Parse(v string) (r Release, ok bool) {
	m := describe.FindStringSubmatch(v)
	if m == nil {
		return Release{}, false
	}
	n := func(s string) int { i, _ := strconv.Atoi(s); return i }
	return Release{Major: n(m[1]), Minor: n(m[2]), Patch: n(m[3]), Commits: n(m[4])}, true
}

// Compare orders two releases: -1 when r comes first, 0 when equal, +1.
func (r Release) Compare(o Release) int {
	a := [4]int{r.Major, r.Minor, r.Patch, r.Commits}
	b := [4]int{o.Major, o.Minor, o.Patch, o.Commits}
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Older reports whether an agent's reported version is an older build than
// the API's: both are releases and the agent's comes first. A worker that
// reported no version (one written against the protocol, not fleetq's
// agent), a version that is not a release, or an API that is not one (a
// dev build) says nothing either way.
func Older(agent, api string) bool {
	a, ok := Parse(api)
	if !ok {
		return false
	}
	g, ok := Parse(agent)
	return ok && g.Compare(a) < 0
}
