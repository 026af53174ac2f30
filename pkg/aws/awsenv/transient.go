package awsenv

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// TransientRetryAfter is how long a caller is told to wait (Retry-After)
// after a call failed on a transient AWS error: the SDK has already spent
// its own retries with backoff (Retries), so the service needs a moment.
const TransientRetryAfter = 2 * time.Second

// transientCodes are the AWS error codes that mean "busy or briefly
// broken, try again": throttling and the services' 5xx.
var transientCodes = map[string]bool{
	"ThrottlingException":                    true,
	"Throttling":                             true,
	"ThrottledException":                     true,
	"RequestThrottled":                       true,
	"RequestThrottledException":              true,
	"TooManyRequestsException":               true,
	"ProvisionedThroughputExceededException": true,
	"RequestLimitExceeded":                   true,
	"TransactionInProgressException":         true,
	"InternalServerError":                    true,
	"InternalFailure":                        true,
	"InternalError":                          true,
	"ServiceUnavailable":                     true,
	"ServiceUnavailableException":            true,
}

// Transient reports whether err is an AWS call that failed for a reason
// that passes: the SDK gave up retrying (retry.MaxAttemptsError), the
// service throttled or answered 5xx, or the connection failed. Callers
// answer such failures "unavailable, retry later" rather than "internal
// error". Errors of the caller's own making (validation, conditions,
// missing resources) are not transient.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var maxed *retry.MaxAttemptsError
	if errors.As(err, &maxed) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) && transientCodes[api.ErrorCode()] {
		return true
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED)
}
