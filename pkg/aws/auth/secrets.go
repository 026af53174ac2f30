package auth

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

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

// TokenOrIAM authenticates operators by either credential: an IAM identity
// API Gateway's Lambda integration attached to the request (as the api
// function does), else the bearer token. The dev stack serves both: its
// HTTP listener, where no request carries an IAM identity, takes the token;
// requests delivered as API Gateway events take IAM.
type TokenOrIAM struct{ Token OperatorToken }

// AuthenticateOperator returns the caller's IAM ARN, or "operator" for the
// token.
func (a TokenOrIAM) AuthenticateOperator(r *http.Request) (string, error) {
	if who, err := (IAMOperator{}).AuthenticateOperator(r); err == nil {
		return who, nil
	}
	return a.Token.AuthenticateOperator(r)
}

// SecretsManagerGetter is the part of the Secrets Manager API the secret
// source uses.
type SecretsManagerGetter interface {
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
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
