//go:build !race

package testenv

// Race reports whether the tests were built with the race detector (-race),
// under which every request to an embedded server costs several times its
// CPU: a test that races many goroutines for what it proves can keep its
// concurrency and shrink its volume there.
const Race = false
