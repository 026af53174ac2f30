package awsenv

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
)

// Service names an AWS service a fleetq client calls, for its retry settings.
type Service string

// The services with their own retry settings. Auto Scaling is not one: the
// SDK's retries are off for it and pkg/aws/asg retries throttling itself.
const (
	DynamoDB    Service = "dynamodb"
	SQS         Service = "sqs"
	SSM         Service = "ssm"
	EventBridge Service = "eventbridge"
)

// RetrySettings are one service's retry policy.
type RetrySettings struct {
	// MaxAttempts bounds the requests per call (the first one included).
	MaxAttempts int
	// MaxBackoff caps one wait; each wait is drawn with full jitter from
	// 0 up to min(MaxBackoff, 2^attempt seconds), the SDK's standard backoff.
	MaxBackoff time.Duration
	// Adaptive adds the SDK's client-side rate limiting, which slows this
	// client's requests while the service throttles it instead of failing them.
	Adaptive bool
}

// Retries are the settings of each service, chosen for bursts: when a Spot
// storm requeues a fleet's work at once, or hundreds of workers register
// and poll after a scale-out, every client meets throttling together.
//
// None of them has a client-side retry quota. The SDK's default quota (500
// tokens per client, 5 spent per retried throttle, 10 per timeout) empties
// after about a hundred failed retries, and every later retry of that client
// fails at once with "retry quota exceeded" (aws-sdk-go-v2 issues #1665 and
// #3413) — exactly when retrying is what is needed. Attempts are bounded
// instead, and waits jittered so that clients throttled together do not
// come back together.
var Retries = map[Service]RetrySettings{
	// DynamoDB: every store write is conditional and transactions carry a
	// ClientRequestToken, so a repeat is safe; an on-demand table's
	// throttling during a burst clears within seconds. Six attempts with
	// waits of at most 1 s fit well inside the API's 29 s.
	DynamoDB: {MaxAttempts: 6, MaxBackoff: time.Second},
	// SQS: submissions (SendMessage) are on the producer's request path;
	// throttling is rare, 5xx brief.
	SQS: {MaxAttempts: 5, MaxBackoff: 2 * time.Second},
	// SSM: GetParameter allows 40 requests a second by default, and cold
	// starts in a registration burst all read the fleet secret at once.
	SSM: {MaxAttempts: 6, MaxBackoff: 2 * time.Second},
	// EventBridge: PutEvents is throttled at the account's rate quota, which
	// a storm of job transitions can reach; the relay is off the request
	// path, so adaptive mode's waits cost nothing a caller sees.
	EventBridge: {MaxAttempts: 8, MaxBackoff: 5 * time.Second, Adaptive: true},
}

// Retryer returns a new retryer with the service's settings; use it as the
// client's Options.Retryer. Extra options (tests use them to shorten
// waits) apply after the settings.
func Retryer(svc Service, optFns ...func(*retry.StandardOptions)) aws.Retryer {
	s, ok := Retries[svc]
	if !ok {
		s = RetrySettings{MaxAttempts: retry.DefaultMaxAttempts, MaxBackoff: retry.DefaultMaxBackoff}
	}
	std := append([]func(*retry.StandardOptions){func(o *retry.StandardOptions) {
		o.MaxAttempts = s.MaxAttempts
		o.MaxBackoff = s.MaxBackoff
		o.Backoff = retry.NewExponentialJitterBackoff(s.MaxBackoff)
		o.RateLimiter = ratelimit.None
		o.Retryables = append(append([]retry.IsErrorRetryable(nil), o.Retryables...), brokenAnswer)
	}}, optFns...)
	if s.Adaptive {
		return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) { o.StandardOptions = std })
	}
	return retry.NewStandard(std...)
}

// brokenAnswer retries a call whose answer broke off while it was read: a
// 200 whose body ends early or whose connection closes under the decoder
// ("deserialization failed ... unexpected EOF" or "... use of closed network
// connection"). The SDK retries a connection that breaks before the answer
// but not one that breaks inside it; its own HTTP transport now and then
// closes such a connection (aws-sdk-go-v2 issues #1825 and #2737). A repeat
// is as safe here as after any reset once the request reached the service:
// reads repeat, store writes are conditional and transactions carry a
// ClientRequestToken.
var brokenAnswer = retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
	var de *smithy.DeserializationError
	if !errors.As(err, &de) {
		return aws.UnknownTernary
	}
	if errors.Is(de, io.ErrUnexpectedEOF) || errors.Is(de, net.ErrClosed) || errors.Is(de, syscall.ECONNRESET) {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
})
