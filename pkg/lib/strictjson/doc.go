// Package strictjson decodes request bodies the way the protocol promises:
// one JSON object, no unknown fields, no trailing data, no key twice in one
// object, no key that matches a field only when case is ignored, valid UTF-8
// throughout, and an error message a person can act on ("field "priority":
// must be a number").
package strictjson
