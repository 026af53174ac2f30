// Package api is fleetq's HTTP API, every route of docs/api.md as one
// net/http handler. In Lambda it is served behind API Gateway through
// aws-lambda-go-api-proxy; in the dev stack and the tests it is an ordinary
// HTTP server. Handlers decode strictly into pkg/domain/wire's bodies, call the
// store, and map its errors to the wire's error codes in one place
// (errors.go); the router serves exactly the table in routes.go.
package api
