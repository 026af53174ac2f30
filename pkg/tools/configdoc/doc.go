// Package configdoc writes the reference of the fleet config file from
// pkg/domain/fleetconfig itself: every field's YAML path, type, default (as
// Parse fills it in) and meaning (its doc comment), as docs/config.md and as
// a JSON Schema editors use to complete and check config files. A test keeps
// the committed files current; `go generate ./pkg/tools/configdoc` rewrites
// them.
package configdoc

//go:generate go test -run TestCommittedReferenceIsCurrent -update .
