package wire

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Code is the machine-readable code of an error answer.
type Code string

// The error codes the API answers with (docs/api.md lists which route
// answers which).
const (
	// CodeInvalidArgument: the request is malformed (400, 405, 413).
	CodeInvalidArgument Code = "invalid_argument"
	// CodeUnauthenticated: the credential is missing or wrong (401).
	CodeUnauthenticated Code = "unauthenticated"
	// CodePermissionDenied: the worker was revoked (403).
	CodePermissionDenied Code = "permission_denied"
	// CodeNotFound: no such route, fleet, job or worker (404).
	CodeNotFound Code = "not_found"
	// CodeConflict: the request contradicts the current state (409).
	CodeConflict Code = "conflict"
	// CodeLeaseLost: the lease token is no longer the job's lease (409).
	CodeLeaseLost Code = "lease_lost"
	// CodeFleetFull: the fleet has reached its worker cap (409).
	CodeFleetFull Code = "fleet_full"
	// CodeNoWorkflows: the fleet serves no workflow, a worker would get no
	// jobs (422).
	CodeNoWorkflows Code = "no_workflows"
	// CodeRateLimited: too many registrations from one address; the answer
	// carries Retry-After (429).
	CodeRateLimited Code = "rate_limited"
	// CodeQuotaExceeded: the submission's tenant is at its cap of open jobs
	// (max_queued); nothing was queued, the answer carries Retry-After (429).
	CodeQuotaExceeded Code = "quota_exceeded"
	// CodeInternal: an unexpected failure; the request may be retried (500).
	CodeInternal Code = "internal"
	// CodeUnavailable: the request changed nothing and is safe to retry (503).
	CodeUnavailable Code = "unavailable"
	// CodeUnknown is never sent by the API: ReadError gives it to an error
	// answer without the error body (a proxy's or load balancer's page).
	CodeUnknown Code = "unknown"
)

// Codes lists every code constant, CodeUnknown last.
var Codes = []Code{
	CodeInvalidArgument, CodeUnauthenticated, CodePermissionDenied, CodeNotFound, CodeConflict,
	CodeLeaseLost, CodeFleetFull, CodeNoWorkflows, CodeRateLimited, CodeInternal, CodeUnavailable,
	CodeQuotaExceeded, CodeUnknown,
}

// ErrorBody is the body of every non-2xx answer:
// {"error": {"code": "...", "message": "..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// Error is an error answer: the HTTP status and the body's code and message.
// The server writes it with WriteError; clients get it from ReadError and
// find it with errors.As.
type Error struct {
	Status  int
	Code    Code
	Message string
	// RetryAfter is the Retry-After header (whole seconds on the wire; 0:
	// none).
	RetryAfter time.Duration
}

// Error reads "<status> <code>: <message>".
func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// WriteError answers e: its status, a Retry-After header when e has one
// (rounded up to whole seconds), and the error body.
func WriteError(w http.ResponseWriter, e *Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	}
	WriteJSON(w, e.Status, ErrorBody{Error: ErrorDetail{Code: e.Code, Message: e.Message}})
}

// WriteJSON answers v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// maxErrorBody bounds how much of an error answer ReadError reads.
const maxErrorBody = 1 << 20

// ReadError reads an error answer (a non-2xx response) into an *Error. An
// answer without the error body (not JSON, or no code) gets CodeUnknown and
// the status text as its message. It reads but does not close res.Body.
func ReadError(res *http.Response) *Error {
	e := &Error{Status: res.StatusCode, Code: CodeUnknown, Message: http.StatusText(res.StatusCode)}
	if raw, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody)); err == nil {
		var b ErrorBody
		if json.Unmarshal(raw, &b) == nil && b.Error.Code != "" {
			e.Code, e.Message = b.Error.Code, b.Error.Message
		}
	}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
