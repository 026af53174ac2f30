// Package strictjson decodes request bodies the way the protocol promises:
// one JSON object, no unknown fields, no trailing data, and an error message a
// person can act on ("field "priority": must be a number").
package strictjson
