package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// StaticSecret is a fleet secret given on the command line (the dev stack).
type StaticSecret string

// FleetSecret returns the secret.
func (s StaticSecret) FleetSecret(context.Context) (string, error) { return string(s), nil }

// SSMGetter is the part of the SSM API the secret source uses.
type SSMGetter interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// SSMSecret reads the fleet secret from a SecureString parameter and keeps it
// for TTL, so a warm Lambda does not call SSM on every registration, while a
// rotated secret is picked up within TTL.
type SSMSecret struct {
	Client SSMGetter
	Name   string
	TTL    time.Duration
	Clock  clock.Clock

	mu      sync.Mutex
	value   string
	fetched time.Time
}

// FleetSecret returns the cached secret, reading SSM when the cache is stale.
func (s *SSMSecret) FleetSecret(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock().Now()
	if s.value != "" && now.Sub(s.fetched) < s.ttl() {
		return s.value, nil
	}
	out, err := s.Client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(s.Name), WithDecryption: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("read fleet secret parameter %s: %w", s.Name, err)
	}
	if out.Parameter == nil || aws.ToString(out.Parameter.Value) == "" {
		return "", fmt.Errorf("fleet secret parameter %s is empty", s.Name)
	}
	s.value, s.fetched = aws.ToString(out.Parameter.Value), now
	return s.value, nil
}

func (s *SSMSecret) ttl() time.Duration { return ttlOr(s.TTL) }

func (s *SSMSecret) clock() clock.Clock { return clockOr(s.Clock) }

// ErrOperatorUnauthenticated is a request without a valid operator credential.
var ErrOperatorUnauthenticated = errors.New("operator credential missing or wrong")

// OperatorToken authenticates operators by "Authorization: Bearer <token>"
// (the dev stack and tests).
type OperatorToken string

// AuthenticateOperator checks the bearer token in constant time.
func (t OperatorToken) AuthenticateOperator(r *http.Request) (string, error) {
	got, ok := BearerToken(r.Header.Get("Authorization"))
	if !ok || !Equal(got, string(t)) {
		return "", ErrOperatorUnauthenticated
	}
	return "operator", nil
}

// IAMOperator authenticates operators by the IAM identity API Gateway attached
// to the request after verifying its SigV4 signature (routes with AWS_IAM
// authorization). A request without one never passed IAM authorization, so
// it is refused even if the route were misconfigured.
type IAMOperator struct{}

// AuthenticateOperator returns the caller's IAM ARN.
func (IAMOperator) AuthenticateOperator(r *http.Request) (string, error) {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
	if !ok || rc.Authorizer == nil || rc.Authorizer.IAM == nil {
		return "", ErrOperatorUnauthenticated
	}
	iam := rc.Authorizer.IAM
	if iam.UserARN == "" && iam.AccessKey == "" {
		return "", ErrOperatorUnauthenticated
	}
	if iam.UserARN != "" {
		return iam.UserARN, nil
	}
	return iam.AccountID + ":" + iam.AccessKey, nil
}

// SecretsManagerGetter is the part of the Secrets Manager API the secret
// source uses.
type SecretsManagerGetter interface {
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SecretsManagerSecret reads the fleet secret from a Secrets Manager secret
// (the one the stack creates, by ARN) and keeps it for TTL, as SSMSecret
// does: a warm function reads it once per TTL, and a rotated value (a new
// AWSCURRENT version) is used within TTL.
type SecretsManagerSecret struct {
	Client SecretsManagerGetter
	ID     string
	TTL    time.Duration
	Clock  clock.Clock

	mu      sync.Mutex
	value   string
	fetched time.Time
}

// FleetSecret returns the cached secret, reading Secrets Manager when the
// cache is stale.
func (s *SecretsManagerSecret) FleetSecret(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := clockOr(s.Clock).Now()
	if s.value != "" && now.Sub(s.fetched) < ttlOr(s.TTL) {
		return s.value, nil
	}
	out, err := s.Client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.ID)})
	if err != nil {
		return "", fmt.Errorf("read fleet secret %s: %w", s.ID, err)
	}
	if aws.ToString(out.SecretString) == "" {
		return "", fmt.Errorf("fleet secret %s is empty (or binary)", s.ID)
	}
	s.value, s.fetched = aws.ToString(out.SecretString), now
	return s.value, nil
}

func ttlOr(d time.Duration) time.Duration {
	if d <= 0 {
		return 5 * time.Minute
	}
	return d
}

func clockOr(c clock.Clock) clock.Clock {
	if c == nil {
		return clock.Real{}
	}
	return c
}

// IAMCaller is the ARN of the IAM identity API Gateway's IAM authorizer
// verified for the request (the session ARN of an assumed role, or a
// user's ARN), or false when the request passed no IAM authorization.
func IAMCaller(r *http.Request) (string, bool) {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
	if !ok || rc.Authorizer == nil || rc.Authorizer.IAM == nil || rc.Authorizer.IAM.UserARN == "" {
		return "", false
	}
	return rc.Authorizer.IAM.UserARN, true
}
