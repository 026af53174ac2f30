// Package strictjson decodes request bodies the way the protocol promises:
// one JSON object, no unknown fields, no trailing data, no key twice in one
// object, no key that matches a field only when case is ignored, valid UTF-8
// throughout, no nesting past DynamoDB's 32 levels, and an error message a
// person can act on ("field "priority": must be a number"). What decoding
// costs grows with the body's size, never with the square of its depth.
package strictjson
