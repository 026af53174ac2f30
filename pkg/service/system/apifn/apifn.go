// Package apifn builds the API function: the worker, producer and operator
// HTTP API behind API Gateway (functions/api), and the constructor the dev
// stack serves the same API with.
package apifn

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/aws/assets"
	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/sqsqueue"
	"github.com/fleetq/fleetq/pkg/service/api"
	"github.com/fleetq/fleetq/pkg/service/console"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/system"
)

// Function is the API function, for system.StartLambda.
var Function = system.Function{Name: awsenv.API, Handler: func(l *system.Lambda, _ io.Writer) (any, error) { return Handler(l) }}

// WaitFunction is the function API Gateway sends the wait route to
// (functions/wait): the same handler as Function's, so the route is served
// by one code path in AWS and in the dev stack; only its concurrency is
// its own.
var WaitFunction = system.Function{Name: awsenv.Wait, Handler: Function.Handler}

// Handler returns the API function's handler: the HTTP API behind API
// Gateway (payload format 2.0), with submissions to FLEETQ_SUBMIT_QUEUE_URL,
// registrations checked as registration says, IAM operators, and presigned
// URLs on FLEETQ_BUCKET when set.
func Handler(e *system.Lambda) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	queueURL, err := e.Require(awsenv.EnvSubmitQueueURL)
	if err != nil {
		return nil, err
	}
	keys, err := consoleKeysOf(e)
	if err != nil {
		return nil, err
	}
	reg, err := registration(e)
	if err != nil {
		return nil, err
	}
	var files api.Assets
	if bucket := e.Lookup(awsenv.EnvBucket); bucket != "" {
		files = &assets.S3{Presign: s3.NewPresignClient(S3(e)), Bucket: bucket, Clock: e.Clock}
	}
	h, err := NewAPI(e.Env, sqsqueue.Queue{Client: SQS(e), URL: queueURL}, keys,
		auth.IAMOperator{}, files, reg)
	if err != nil {
		return nil, err
	}
	return httpadapter.NewV2(h).ProxyWithContext, nil
}

// registration is how the API function checks registrations. Attested:
// each fleet's worker role from FLEETQ_WORKER_ROLES, its groups from
// FLEETQ_FLEET_GROUPS and FLEETQ_FLEET_ON_DEMAND_GROUPS, identity requests
// forwarded to FLEETQ_STS_ENDPOINT (default the region's STS) and
// instances looked up through Auto Scaling. By secret: the Secrets Manager
// secret of each fleet with accept_secret, from FLEETQ_FLEET_SECRETS.
func registration(e *system.Lambda) (APIOption, error) {
	arns := map[string]string{}
	// The stack sets FLEETQ_FLEET_SECRETS only when some fleet accepts a secret.
	if awsenv.FleetSecrets(e.Config) {
		if raw := e.Lookup(awsenv.EnvFleetSecrets); raw != "" {
			if err := json.Unmarshal([]byte(raw), &arns); err != nil {
				return nil, fmt.Errorf("%s: a JSON object of fleet slug to secret ARN: %w", awsenv.EnvFleetSecrets, err)
			}
		}
	}
	for _, f := range e.Config.Fleets {
		if f.AcceptSecret && arns[f.Slug] == "" {
			return nil, fmt.Errorf("%s: fleet %s accepts a secret but has none", awsenv.EnvFleetSecrets, f.Slug)
		}
	}
	var secrets api.FleetSecrets
	if len(arns) > 0 {
		secrets = &auth.SecretsManagerFleetSecrets{Client: e.SecretsManager(), ARNs: arns, Clock: e.Clock}
	}
	raw := e.Lookup(awsenv.EnvWorkerRoles)
	if raw == "" {
		return Registration(nil, secrets), nil
	}
	roles := map[string]string{}
	if err := json.Unmarshal([]byte(raw), &roles); err != nil {
		return nil, fmt.Errorf("%s: a JSON object of fleet slug to role ARN: %w", awsenv.EnvWorkerRoles, err)
	}
	groups := map[string][]string{}
	for _, name := range []string{awsenv.EnvFleetGroups, awsenv.EnvFleetOnDemandGroups} {
		if name == awsenv.EnvFleetOnDemandGroups && !awsenv.OnDemandGroups(e.Config) {
			continue // the stack sets no On-Demand groups
		}
		if v := e.Lookup(name); v != "" {
			names, err := scaler.ParseGroupNames(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			for slug, g := range names {
				groups[slug] = append(groups[slug], g)
			}
		}
	}
	endpoint := e.Lookup(awsenv.EnvSTSEndpoint)
	if endpoint == "" {
		endpoint = attest.RegionalEndpoint(e.AWS.Region)
	}
	v, err := NewAttestor(e.Env, endpoint, asg.New(e.AutoScaling(), asg.Options{}), roles, groups)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", awsenv.EnvWorkerRoles, err)
	}
	return Registration(v, secrets), nil
}

// SQS returns an SQS client (FLEETQ_SQS_ENDPOINT overrides the endpoint).
func SQS(e *system.Lambda) *sqs.Client {
	return sqs.NewFromConfig(e.AWS, func(o *sqs.Options) {
		e.Endpoint(awsenv.EnvSQSEndpoint, &o.BaseEndpoint)
		o.Retryer = awsenv.Retryer(awsenv.SQS)
	})
}

// S3 returns an S3 client (FLEETQ_S3_ENDPOINT overrides the endpoint, with
// path-style addressing as local S3 servers need).
func S3(e *system.Lambda) *s3.Client {
	return s3.NewFromConfig(e.AWS, func(o *s3.Options) {
		if e.Endpoint(awsenv.EnvS3Endpoint, &o.BaseEndpoint) {
			o.UsePathStyle = true
		}
	})
}

// consoleKeysOf are the keys console sessions are signed with: the Secrets
// Manager secret FLEETQ_CONSOLE_KEY_ARN (the stack generates it).
func consoleKeysOf(e *system.Lambda) (console.Keys, error) {
	arn, err := e.Require(awsenv.EnvConsoleKeyARN)
	if err != nil {
		return nil, fmt.Errorf("%w: the API cannot sign console sessions", err)
	}
	return &auth.SecretsManagerKeys{Client: e.SecretsManager(), ID: arn, Window: system.KeyRotationWindow}, nil
}

// APIOption tunes the API beyond its required dependencies.
type APIOption func(*api.Config)

// RegisterLimit sets registrations per minute per source address (default:
// the config's registration_limit).
func RegisterLimit(n int) APIOption { return func(o *api.Config) { o.RegisterLimit = n } }

// NoAnnounce leaves a job's events to the relay instead of publishing them
// right after the transition (benchmarks count the lifecycle's requests
// apart from the announcement's).
func NoAnnounce() APIOption { return func(o *api.Config) { o.Events = nil } }

// Registration sets how workers prove they belong to a fleet: attested
// (nil: no attested registration) and by the fleets' own secrets (nil: no
// fleet takes a secret).
func Registration(attested api.Attestor, secrets api.FleetSecrets) APIOption {
	return func(o *api.Config) { o.Attestor, o.FleetSecrets = attested, secrets }
}

// NewAttestor returns the verifier of attested registrations: identity
// requests are forwarded to the STS endpoint only, and a fleet's workers
// must be its role (roles, by slug) on an instance of its groups (groups,
// by slug) or a started instance of its Spot pool (the store's records).
// The server id is the stage. A fleet without a role is not
// attested.
func NewAttestor(e *system.Env, stsEndpoint string, instances attest.Instances, roles map[string]string, groups map[string][]string) (*attest.Verifier, error) {
	fleets := map[string]attest.Fleet{}
	for _, f := range e.Config.Fleets {
		if roles[f.Slug] == "" {
			continue
		}
		fleets[f.Slug] = attest.Fleet{RoleARN: roles[f.Slug], Groups: groups[f.Slug], SpotPool: f.SpotPool.Enabled()}
	}
	return attest.NewVerifier(stsEndpoint, instances, attest.Config{ServerID: e.Config.Stage, Fleets: fleets, Clock: e.Clock, Pool: e.Store})
}

// NewAPI returns the worker, producer and operator HTTP API. queue takes
// submissions, consoleKeys sign operator console sessions, operator authenticates
// operators, files presigns job input and output URLs (nil: a stage without
// a bucket).
func NewAPI(e *system.Env, queue api.Enqueuer, consoleKeys console.Keys, operator api.OperatorAuthenticator, files api.Assets, opts ...APIOption) (http.Handler, error) {
	c := api.Config{Assets: files}
	if e.Relay != nil {
		c.Events = e.Relay
	}
	for _, opt := range opts {
		opt(&c)
	}
	return api.New(e.Config, e.Store, queue, consoleKeys, operator, e.Clock, e.Logger, c)
}
