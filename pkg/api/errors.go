package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fleetq/fleetq/pkg/auth"
	"github.com/fleetq/fleetq/pkg/store"
	"github.com/fleetq/fleetq/pkg/strictjson"
	"github.com/fleetq/fleetq/pkg/submission"
)

// Error is an answer of the protocol's error shape.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter int // seconds, for 429
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func invalid(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_argument", Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf(format, args...)}
}

// errorBody is {"error": {"code", "message"}}.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// toError maps every error a handler can meet to the protocol. It is the one
// place where store and auth errors become HTTP statuses. Messages never
// contain a secret, a token or a stack trace: unexpected errors are logged
// and answered generically.
func toError(err error) *Error {
	var e *Error
	var sj *strictjson.Error
	var se *submission.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &sj):
		return invalid("%s", sj.Msg)
	case errors.As(err, &se):
		return invalid("%s", se.Msg)
	case errors.Is(err, store.ErrLeaseLost):
		return &Error{Status: http.StatusConflict, Code: "lease_lost", Message: "the lease token is not the job's current lease; stop working on this job"}
	case errors.Is(err, store.ErrFleetFull):
		return &Error{Status: http.StatusConflict, Code: "fleet_full", Message: "the fleet has reached its worker cap; deregister or remove stale workers first"}
	case errors.Is(err, store.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: conflictMessage(err)}
	case errors.Is(err, store.ErrNotFound):
		return notFound("%s", notFoundMessage(err))
	case errors.Is(err, store.ErrUnauthenticated), errors.Is(err, auth.ErrMalformedToken):
		return &Error{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "the worker token is missing, malformed or replaced; register again"}
	case errors.Is(err, auth.ErrOperatorUnauthenticated):
		return &Error{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "this route needs the operator credential"}
	case errors.Is(err, store.ErrRevoked):
		return &Error{Status: http.StatusForbidden, Code: "permission_denied", Message: "this worker was revoked by an operator"}
	case errors.Is(err, store.ErrContention):
		return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the request raced another and changed nothing; retry it"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the request timed out; it is safe to retry"}
	default:
		return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error; the request may be retried"}
	}
}

// notFoundMessage and conflictMessage pass the store's own wording through:
// store errors name ids and states, never secrets.
func notFoundMessage(err error) string { return err.Error() }
func conflictMessage(err error) string { return err.Error() }

func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toError(err)
	if e.Status >= 500 {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	var body errorBody
	body.Error.Code, body.Error.Message = e.Code, e.Message
	writeJSON(w, e.Status, body)
}
