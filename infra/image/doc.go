// Package image holds the worker images' build: a Packer template
// (fleetq-worker.pkr.hcl) and the install scripts it runs on the build
// instance, with the tests that check those scripts here, where no image
// can be built: their syntax, shellcheck, and that running each twice in a
// scratch root leaves the same result.
package image
