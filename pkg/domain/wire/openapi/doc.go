// Package openapi holds fleetq's OpenAPI 3.1 document (openapi.yaml, the
// published description of the HTTP API whose Go types are pkg/domain/wire)
// and a validator that checks real traffic against it. The API tests send
// every request through the validator, so a route, field, status or error
// shape that differs from the document fails the tests: the document
// cannot drift from the server.
package openapi
