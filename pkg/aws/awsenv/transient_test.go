package awsenv_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
)

func op(err error) error {
	return fmt.Errorf("lease job j1: %w", &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "TransactWriteItems", Err: err})
}

func apiErr(code string) error {
	return &smithy.GenericAPIError{Code: code, Message: "m"}
}

func TestTransientTellsPassingFailuresFromOthers(t *testing.T) {
	status := func(n int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: n}}, Err: errors.New("x")}
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"retries exhausted", op(&retry.MaxAttemptsError{Attempt: 6, Err: apiErr("ProvisionedThroughputExceededException")}), true},
		{"DynamoDB throttling", op(apiErr("ProvisionedThroughputExceededException")), true},
		{"throttling", op(apiErr("ThrottlingException")), true},
		{"EC2-style throttling", op(apiErr("RequestLimitExceeded")), true},
		{"internal server error", op(apiErr("InternalServerError")), true},
		{"service unavailable", op(apiErr("ServiceUnavailable")), true},
		{"HTTP 503", op(status(503)), true},
		{"connection reset", op(&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}), true},
		{"cut answer", op(io.ErrUnexpectedEOF), true},
		{"nil", nil, false},
		{"condition failed", op(apiErr("ConditionalCheckFailedException")), false},
		{"validation", op(apiErr("ValidationException")), false},
		{"HTTP 400", op(status(400)), false},
		{"plain", errors.New("boom"), false},
	} {
		if got := awsenv.Transient(c.err); got != c.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
