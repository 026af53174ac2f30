package system

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/aws/assets"
	"github.com/fleetq/fleetq/pkg/aws/attest"
	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/spotprice"
	"github.com/fleetq/fleetq/pkg/aws/sqsqueue"
	"github.com/fleetq/fleetq/pkg/aws/store"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/service/api"
	"github.com/fleetq/fleetq/pkg/service/console"
	"github.com/fleetq/fleetq/pkg/service/interruption"
	"github.com/fleetq/fleetq/pkg/service/jobevents"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/webhook"
)

// Lambda is a function's environment in AWS: the variables the stack sets,
// the AWS configuration, clients that honour the endpoint overrides, and the
// Env every function is built from. Each function's main is StartLambda.
type Lambda struct {
	*Env
	Function awsenv.Function
	Table    string
	AWS      aws.Config

	getenv Getenv
}

// Getenv reads one variable (os.Getenv in Lambda; a map in tests).
type Getenv func(string) string

// LoadLambda reads fn's stage, fleet config, table name, log level and
// event bus, and the default AWS configuration. A missing or malformed
// variable is an error that names it: a function that cannot know its table
// must not start. fn may read only the variables awsenv.Vars declares for
// it.
func LoadLambda(ctx context.Context, fn awsenv.Function, getenv Getenv, logOut io.Writer) (*Lambda, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	l := &Lambda{Function: fn, getenv: getenv}
	cfg, err := LoadConfig(l.Lookup)
	if err != nil {
		return nil, err
	}
	table := l.Lookup(awsenv.EnvTable)
	if table == "" {
		table = fleetconfig.TableName(cfg.Stage)
	}
	level := l.Lookup(awsenv.EnvLogLevel)
	if level == "" {
		level = "info"
	}
	log, err := NewLogger(logOut, level)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", awsenv.EnvLogLevel, err)
	}
	if l.AWS, err = awsenv.Load(ctx); err != nil {
		return nil, err
	}
	l.Table = table
	log = log.With("stage", cfg.Stage)
	var events store.Publisher
	// Only the API and the scaler publish: the other functions leave their
	// jobs' events in the outbox, which the scaler's tick relays.
	if awsenv.Reads(fn, awsenv.EnvEventBus) {
		if bus := l.Lookup(awsenv.EnvEventBus); bus != "" {
			events = jobevents.EventBridge{Client: l.EventBridge(), Bus: bus}
		}
	}
	// Cost lines go to stdout with the scaler's metrics: CloudWatch Logs
	// turns Embedded Metric Format lines into metrics.
	if l.Env, err = New(cfg, l.DynamoDB(), table, clock.Real{}, log, events, CostMetrics(os.Stdout)); err != nil {
		return nil, err
	}
	return l, nil
}

// Handler builds the function's handler, for lambda.Start: the API's
// (metrics unused), dispatch's, the scaler's (its metric lines written to
// metrics) or the interruption function's.
func (e *Lambda) Handler(metrics io.Writer) (any, error) {
	switch e.Function {
	case awsenv.API:
		return e.APIHandler()
	case awsenv.Dispatch:
		return e.DispatchHandler()
	case awsenv.Scaler:
		return e.ScalerHandler(metrics)
	case awsenv.Interruption:
		return e.InterruptionHandler()
	}
	return nil, fmt.Errorf("no function %q", e.Function)
}

// LoadConfig returns the fleet config named by FLEETQ_CONFIG_FILE, else the
// built-in config of FLEETQ_STAGE. A config whose stage differs from
// FLEETQ_STAGE is refused: the table, queues and ASG names derive from it.
func LoadConfig(getenv Getenv) (*fleetconfig.Config, error) {
	stage := getenv(awsenv.EnvStage)
	if file := getenv(awsenv.EnvConfigFile); file != "" {
		cfg, err := fleetconfig.Load(file)
		if err != nil {
			return nil, err
		}
		if stage != "" && cfg.Stage != stage {
			return nil, fmt.Errorf("%s: %s says stage %q but %s is %q", awsenv.EnvConfigFile, file, cfg.Stage, awsenv.EnvStage, stage)
		}
		return cfg, nil
	}
	if stage == "" {
		return nil, fmt.Errorf("%s is not set (and no %s given)", awsenv.EnvStage, awsenv.EnvConfigFile)
	}
	return fleetconfig.ForStage(stage)
}

// Require returns a variable's value or an error naming it.
func (e *Lambda) Require(name string) (string, error) {
	v := e.Lookup(name)
	if v == "" {
		return "", fmt.Errorf("%s is not set", name)
	}
	return v, nil
}

// Lookup returns a variable's value, empty when unset. Reading a variable
// awsenv.Vars does not declare for the function panics: the stack would
// never set it, so the function would read nothing in AWS.
func (e *Lambda) Lookup(name string) string {
	if !awsenv.Reads(e.Function, name) {
		panic(fmt.Sprintf("the %s function reads %s, which awsenv.Vars does not declare for it", e.Function, name))
	}
	return e.getenv(name)
}

// endpoint sets a client's endpoint from a FLEETQ_*_ENDPOINT override when
// it is set; else the client keeps the endpoint the SDK resolved (from
// AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL or the shared config).
func (e *Lambda) endpoint(name string, base **string) bool {
	if v := e.Lookup(name); v != "" {
		*base = aws.String(v)
		return true
	}
	return false
}

// DynamoDB returns a DynamoDB client (FLEETQ_DYNAMODB_ENDPOINT overrides the
// endpoint). The DynamoDB, SQS, SSM and EventBridge clients retry with their
// service's awsenv.Retries; Secrets Manager and S3 keep the SDK's default
// retryer, and Auto Scaling retries in pkg/aws/asg.
func (e *Lambda) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(e.AWS, func(o *dynamodb.Options) {
		e.endpoint(awsenv.EnvDynamoDBEndpoint, &o.BaseEndpoint)
		o.Retryer = awsenv.Retryer(awsenv.DynamoDB)
	})
}

// SQS returns an SQS client (FLEETQ_SQS_ENDPOINT overrides the endpoint).
func (e *Lambda) SQS() *sqs.Client {
	return sqs.NewFromConfig(e.AWS, func(o *sqs.Options) {
		e.endpoint(awsenv.EnvSQSEndpoint, &o.BaseEndpoint)
		o.Retryer = awsenv.Retryer(awsenv.SQS)
	})
}

// SSM returns an SSM client (FLEETQ_SSM_ENDPOINT overrides the endpoint).
func (e *Lambda) SSM() *ssm.Client {
	return ssm.NewFromConfig(e.AWS, func(o *ssm.Options) {
		e.endpoint(awsenv.EnvSSMEndpoint, &o.BaseEndpoint)
		o.Retryer = awsenv.Retryer(awsenv.SSM)
	})
}

// SecretsManager returns a Secrets Manager client (FLEETQ_SECRETSMANAGER_ENDPOINT overrides the endpoint).
func (e *Lambda) SecretsManager() *secretsmanager.Client {
	return secretsmanager.NewFromConfig(e.AWS, func(o *secretsmanager.Options) { e.endpoint(awsenv.EnvSecretsManagerEndpoint, &o.BaseEndpoint) })
}

// rotationWindow is how long a signing key's previous version still
// verifies after a rotation: the longest a console session lasts, so a
// rotation signs nobody out (rotate twice to end every session at once).
const rotationWindow = console.MaxSessionTTL

// ConsoleKeys are the keys console sessions are signed with: the Secrets
// Manager secret FLEETQ_CONSOLE_KEY_ARN (the stack generates it).
func (e *Lambda) ConsoleKeys() (console.Keys, error) {
	arn, err := e.Require(awsenv.EnvConsoleKeyARN)
	if err != nil {
		return nil, fmt.Errorf("%w: the API cannot sign console sessions", err)
	}
	return &auth.SecretsManagerKeys{Client: e.SecretsManager(), ID: arn, Window: rotationWindow}, nil
}

// WebhookKeys are the keys job callbacks are signed with: the Secrets
// Manager secret FLEETQ_WEBHOOK_KEY_ARN (the stack generates it).
func (e *Lambda) WebhookKeys() (webhook.Keys, error) {
	arn, err := e.Require(awsenv.EnvWebhookKeyARN)
	if err != nil {
		return nil, fmt.Errorf("%w: the scaler cannot sign job callbacks", err)
	}
	return &auth.SecretsManagerKeys{Client: e.SecretsManager(), ID: arn, Window: rotationWindow}, nil
}

// EventBridge returns an EventBridge client (FLEETQ_EVENTBRIDGE_ENDPOINT overrides the endpoint).
func (e *Lambda) EventBridge() *eventbridge.Client {
	return eventbridge.NewFromConfig(e.AWS, func(o *eventbridge.Options) {
		e.endpoint(awsenv.EnvEventBridgeEndpoint, &o.BaseEndpoint)
		o.Retryer = awsenv.Retryer(awsenv.EventBridge)
	})
}

// S3 returns an S3 client (FLEETQ_S3_ENDPOINT overrides the endpoint, with
// path-style addressing as local S3 servers need).
func (e *Lambda) S3() *s3.Client {
	return s3.NewFromConfig(e.AWS, func(o *s3.Options) {
		if e.endpoint(awsenv.EnvS3Endpoint, &o.BaseEndpoint) {
			o.UsePathStyle = true
		}
	})
}

// EC2 returns an EC2 client (FLEETQ_EC2_ENDPOINT overrides the endpoint),
// for the scaler's Spot price reads.
func (e *Lambda) EC2() *ec2.Client {
	return ec2.NewFromConfig(e.AWS, func(o *ec2.Options) { e.endpoint(awsenv.EnvEC2Endpoint, &o.BaseEndpoint) })
}

// AutoScaling returns an Auto Scaling client (FLEETQ_AUTOSCALING_ENDPOINT
// overrides the endpoint) with the SDK's own retries off: pkg/aws/asg retries
// throttling itself, and the two would multiply.
func (e *Lambda) AutoScaling() *autoscaling.Client {
	return autoscaling.NewFromConfig(e.AWS, func(o *autoscaling.Options) {
		e.endpoint(awsenv.EnvAutoScalingEndpoint, &o.BaseEndpoint)
		asg.WithoutSDKRetries(o)
	})
}

// FleetGroups returns the fleets' Auto Scaling Groups as scaling capacity,
// from FLEETQ_FLEET_GROUPS and FLEETQ_FLEET_ON_DEMAND_GROUPS.
func (e *Lambda) FleetGroups() (scaler.Groups, error) {
	raw, err := e.Require(awsenv.EnvFleetGroups)
	if err != nil {
		return scaler.Groups{}, err
	}
	names, err := scaler.ParseGroupNames(raw)
	if err != nil {
		return scaler.Groups{}, fmt.Errorf("%s: %w", awsenv.EnvFleetGroups, err)
	}
	for _, f := range e.Config.Fleets {
		if names[f.Slug] == "" {
			return scaler.Groups{}, fmt.Errorf("%s: fleet %s has no group", awsenv.EnvFleetGroups, f.Slug)
		}
	}
	groups := scaler.Groups{Adapter: asg.New(e.AutoScaling(), asg.Options{}), Names: names}
	if groups.OnDemandNames, err = e.onDemandGroups(); err != nil {
		return scaler.Groups{}, err
	}
	return groups, nil
}

// subnets reads FLEETQ_SUBNETS, the scaler's: the subnets of the fleets'
// groups with their zones, which it drops and restores in Spot groups.
func (e *Lambda) subnets(groups *scaler.Groups) error {
	raw := e.Lookup(awsenv.EnvSubnets)
	if raw == "" {
		return nil
	}
	var err error
	if groups.Subnets, err = scaler.ParseSubnets(raw); err != nil {
		return fmt.Errorf("%s: %w", awsenv.EnvSubnets, err)
	}
	return nil
}

// onDemandGroups reads FLEETQ_FLEET_ON_DEMAND_GROUPS: every fleet whose
// config turns the On-Demand rung on must have its group there (dispatch
// wakes it and starts bridges in it, the scaler climbs to it); a fleet with
// a bridge has one too.
func (e *Lambda) onDemandGroups() (map[string]string, error) {
	names := map[string]string{}
	if !awsenv.OnDemandGroups(e.Config) {
		return names, nil // the stack sets no On-Demand groups
	}
	raw := e.Lookup(awsenv.EnvFleetOnDemandGroups)
	if raw != "" {
		var err error
		if names, err = scaler.ParseGroupNames(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", awsenv.EnvFleetOnDemandGroups, err)
		}
	}
	for _, f := range e.Config.Fleets {
		if f.OnDemand.Enabled() && names[f.Slug] == "" {
			return nil, fmt.Errorf("%s: fleet %s sets on_demand.fallback_after but has no On-Demand group", awsenv.EnvFleetOnDemandGroups, f.Slug)
		}
	}
	return names, nil
}

// APIHandler returns the API function's handler: the HTTP API behind API
// Gateway (payload format 2.0), with submissions to FLEETQ_SUBMIT_QUEUE_URL,
// registrations checked as Registration says, IAM operators, and presigned
// URLs on FLEETQ_BUCKET when set.
func (e *Lambda) APIHandler() (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	queueURL, err := e.Require(awsenv.EnvSubmitQueueURL)
	if err != nil {
		return nil, err
	}
	consoleKeys, err := e.ConsoleKeys()
	if err != nil {
		return nil, err
	}
	registration, err := e.Registration()
	if err != nil {
		return nil, err
	}
	var files api.Assets
	if bucket := e.Lookup(awsenv.EnvBucket); bucket != "" {
		files = &assets.S3{Presign: s3.NewPresignClient(e.S3()), Bucket: bucket, Clock: e.Clock}
	}
	h, err := NewAPI(e.Env, sqsqueue.Queue{Client: e.SQS(), URL: queueURL}, consoleKeys,
		auth.IAMOperator{}, files, registration)
	if err != nil {
		return nil, err
	}
	return httpadapter.NewV2(h).ProxyWithContext, nil
}

// Registration is how the API function checks registrations. Attested:
// each fleet's worker role from FLEETQ_WORKER_ROLES, its groups from
// FLEETQ_FLEET_GROUPS and FLEETQ_FLEET_ON_DEMAND_GROUPS, identity requests
// forwarded to FLEETQ_STS_ENDPOINT (default the region's STS) and
// instances looked up through Auto Scaling. By secret: the Secrets Manager
// secret of each fleet with accept_secret, from FLEETQ_FLEET_SECRETS.
func (e *Lambda) Registration() (APIOption, error) {
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

// DispatchHandler returns the dispatch function's handler, waking the
// fleets' groups of FLEETQ_FLEET_GROUPS.
func (e *Lambda) DispatchHandler() (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	groups, err := e.FleetGroups()
	if err != nil {
		return nil, err
	}
	h, err := NewDispatch(e.Env, groups)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

// ScalerHandler returns the scaler function's handler: one tick per
// scheduled event over the groups of FLEETQ_FLEET_GROUPS, with the metric
// lines written to metrics (stdout, which CloudWatch Logs turns into
// metrics), reading each fleet's Spot prices through EC2 about once an hour.
func (e *Lambda) ScalerHandler(metrics io.Writer) (func(context.Context, events.CloudWatchEvent) (TickSummary, error), error) {
	groups, err := e.FleetGroups()
	if err != nil {
		return nil, err
	}
	if err := e.subnets(&groups); err != nil {
		return nil, err
	}
	if len(e.Config.Webhooks.AllowedHosts) > 0 {
		// The scaler's tick drains the relay, which delivers the callbacks.
		keys, err := e.WebhookKeys()
		if err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		if err := EnableWebhooks(e.Env, keys, webhook.Guard{}); err != nil {
			return nil, err
		}
	}
	sc, err := NewScaler(e.Env, groups, metrics, spotprice.Reader{EC2: e.EC2()})
	if err != nil {
		return nil, err
	}
	return ScheduleHandler(sc), nil
}

// InterruptionHandler returns the interruption function's handler, which
// completes lifecycle actions through the Auto Scaling API.
func (e *Lambda) InterruptionHandler() (func(context.Context, events.CloudWatchEvent) (interruption.Summary, error), error) {
	h, err := NewInterruption(e.Env, asg.New(e.AutoScaling(), asg.Options{}))
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

// NewLogger returns a JSON logger at level (debug, info, warn or error).
func NewLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	if w == nil {
		w = os.Stderr
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}
