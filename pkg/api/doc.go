// Package api is fleetq's HTTP API, every route of the protocol (see
// docs/api.md) as one net/http handler. In Lambda it is served behind API
// Gateway through aws-lambda-go-api-proxy; in the dev stack and the tests it
// is an ordinary HTTP server. Handlers decode strictly, call the store, and
// map its errors to the protocol's error shape in one place (errors.go).
package api
