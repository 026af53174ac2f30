package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/submission"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/lib/strictjson"
)

func invalid(format string, args ...any) *wire.Error {
	return &wire.Error{Status: http.StatusBadRequest, Code: wire.CodeInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *wire.Error {
	return &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *wire.Error {
	return &wire.Error{Status: http.StatusConflict, Code: wire.CodeConflict, Message: fmt.Sprintf(format, args...)}
}

// toError maps every error a handler can meet to the contract's error. It is
// the one place where store and auth errors become HTTP statuses. Messages
// never contain a secret, a token or a stack trace: unexpected errors are
// logged and answered generically.
func toError(err error) *wire.Error {
	var we *wire.Error
	var sj *strictjson.Error
	var se *submission.Error
	switch {
	case errors.As(err, &we):
		return we
	case errors.As(err, &sj):
		return invalid("%s", sj.Msg)
	case errors.As(err, &se) && se.TooLarge:
		return &wire.Error{Status: http.StatusRequestEntityTooLarge, Code: wire.CodeInvalidArgument, Message: se.Msg}
	case errors.As(err, &se):
		return invalid("%s", se.Msg)
	case errors.Is(err, fault.ErrItemTooLarge):
		return &wire.Error{Status: http.StatusRequestEntityTooLarge, Code: wire.CodeInvalidArgument, Message: "the job's record would exceed DynamoDB's 400 KB item limit; store large data as objects"}
	case errors.Is(err, fault.ErrLeaseLost):
		return &wire.Error{Status: http.StatusConflict, Code: wire.CodeLeaseLost, Message: "the lease token is not the job's current lease; stop working on this job"}
	case errors.Is(err, fault.ErrFleetFull):
		return &wire.Error{Status: http.StatusConflict, Code: wire.CodeFleetFull, Message: "the fleet has reached its worker cap; deregister or remove stale workers first"}
	case errors.Is(err, fault.ErrConflict):
		return &wire.Error{Status: http.StatusConflict, Code: wire.CodeConflict, Message: conflictMessage(err)}
	case errors.Is(err, fault.ErrNotFound):
		return notFound("%s", notFoundMessage(err))
	case errors.Is(err, fault.ErrUnauthenticated), errors.Is(err, auth.ErrMalformedToken):
		return &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: "the worker token is missing, malformed or replaced; register again"}
	case errors.Is(err, auth.ErrOperatorUnauthenticated):
		return &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: "this route needs the operator credential"}
	case errors.Is(err, attest.ErrUnauthenticated):
		return &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: "attested registration: " + err.Error()}
	case errors.Is(err, attest.ErrDenied):
		return &wire.Error{Status: http.StatusForbidden, Code: wire.CodePermissionDenied, Message: "attested registration: " + err.Error()}
	case errors.Is(err, attest.ErrUnavailable):
		return &wire.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, RetryAfter: awsenv.TransientRetryAfter,
			Message: "attested registration: STS or Auto Scaling could not be asked; retry after the Retry-After seconds"}
	case errors.Is(err, fault.ErrRevoked):
		return &wire.Error{Status: http.StatusForbidden, Code: wire.CodePermissionDenied, Message: "this worker was revoked by an operator"}
	case errors.Is(err, fault.ErrContention):
		return &wire.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "the request raced another and changed nothing; retry it"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &wire.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "the request timed out; it is safe to retry"}
	case awsenv.Transient(err):
		// Throttling, an AWS 5xx or a broken connection the SDK's retries
		// did not get past: back off and retry.
		return &wire.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, RetryAfter: awsenv.TransientRetryAfter,
			Message: "AWS is throttling or briefly unavailable; retry after the Retry-After seconds"}
	default:
		return &wire.Error{Status: http.StatusInternalServerError, Code: wire.CodeInternal, Message: "internal error; the request may be retried"}
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
	wire.WriteError(w, e)
}
