package version

// Version is the build's version, set by `make build` and `make release`
// with -ldflags "-X github.com/fleetq/fleetq/pkg/lib/version.Version=v1.2.3"
// (git describe). A binary built without it says Dev.
var Version = Dev

// Dev is the version of a binary built without a stamped version
// (go run, go test).
const Dev = "dev"

// Get returns the stamped version.
func Get() string { return Version }
