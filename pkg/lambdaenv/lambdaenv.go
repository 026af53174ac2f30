// Package lambdaenv wires a fleetq Lambda function from its environment: the
// stage's fleet config, a structured logger, the AWS configuration, and
// clients that honour the FLEETQ_*_ENDPOINT overrides. Every function's main
// calls Load and then hands the pieces to the package holding its logic, so
// functions/ stays a few lines each.
package lambdaenv

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/fleetq/fleetq/pkg/asg"
	"github.com/fleetq/fleetq/pkg/awsenv"
	"github.com/fleetq/fleetq/pkg/fleetconfig"
	"github.com/fleetq/fleetq/pkg/scaler"
	"github.com/fleetq/fleetq/pkg/store"
)

// Env is what a function reads from its environment.
type Env struct {
	Config *fleetconfig.Config
	Table  string
	AWS    aws.Config
	Logger *slog.Logger

	getenv func(string) string
}

// Getenv reads one variable (os.Getenv in Lambda; a map in tests).
type Getenv func(string) string

// Load reads the stage, fleet config, table name and log level, and the
// default AWS configuration. A missing or malformed variable is an error
// that names it: a function that cannot know its table must not start.
func Load(ctx context.Context, getenv Getenv, logOut io.Writer) (*Env, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return nil, err
	}
	table := getenv(awsenv.EnvTable)
	if table == "" {
		table = fleetconfig.TableName(cfg.Stage)
	}
	level := getenv(awsenv.EnvLogLevel)
	if level == "" {
		level = "info"
	}
	log, err := NewLogger(logOut, level)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", awsenv.EnvLogLevel, err)
	}
	awsCfg, err := awsenv.Load(ctx)
	if err != nil {
		return nil, err
	}
	return &Env{Config: cfg, Table: table, AWS: awsCfg, Logger: log.With("stage", cfg.Stage), getenv: getenv}, nil
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
func (e *Env) Require(name string) (string, error) {
	v := e.getenv(name)
	if v == "" {
		return "", fmt.Errorf("%s is not set", name)
	}
	return v, nil
}

// Lookup returns a variable's value, empty when unset.
func (e *Env) Lookup(name string) string { return e.getenv(name) }

func (e *Env) endpoint(name string) *string {
	if v := e.getenv(name); v != "" {
		return aws.String(v)
	}
	return nil
}

// DynamoDB returns a DynamoDB client (FLEETQ_DYNAMODB_ENDPOINT overrides the endpoint).
func (e *Env) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(e.AWS, func(o *dynamodb.Options) { o.BaseEndpoint = e.endpoint(awsenv.EnvDynamoDBEndpoint) })
}

// SQS returns an SQS client (FLEETQ_SQS_ENDPOINT overrides the endpoint).
func (e *Env) SQS() *sqs.Client {
	return sqs.NewFromConfig(e.AWS, func(o *sqs.Options) { o.BaseEndpoint = e.endpoint(awsenv.EnvSQSEndpoint) })
}

// SSM returns an SSM client (FLEETQ_SSM_ENDPOINT overrides the endpoint).
func (e *Env) SSM() *ssm.Client {
	return ssm.NewFromConfig(e.AWS, func(o *ssm.Options) { o.BaseEndpoint = e.endpoint(awsenv.EnvSSMEndpoint) })
}

// EventBridge returns an EventBridge client (FLEETQ_EVENTBRIDGE_ENDPOINT overrides the endpoint).
func (e *Env) EventBridge() *eventbridge.Client {
	return eventbridge.NewFromConfig(e.AWS, func(o *eventbridge.Options) { o.BaseEndpoint = e.endpoint(awsenv.EnvEventBridgeEndpoint) })
}

// S3 returns an S3 client (FLEETQ_S3_ENDPOINT overrides the endpoint, with
// path-style addressing as local S3 servers need).
func (e *Env) S3() *s3.Client {
	return s3.NewFromConfig(e.AWS, func(o *s3.Options) {
		if ep := e.endpoint(awsenv.EnvS3Endpoint); ep != nil {
			o.BaseEndpoint, o.UsePathStyle = ep, true
		}
	})
}

// AutoScaling returns an Auto Scaling client (FLEETQ_AUTOSCALING_ENDPOINT
// overrides the endpoint) with the SDK's own retries off: pkg/asg retries
// throttling itself, and the two would multiply.
func (e *Env) AutoScaling() *autoscaling.Client {
	return autoscaling.NewFromConfig(e.AWS, func(o *autoscaling.Options) {
		o.BaseEndpoint = e.endpoint(awsenv.EnvAutoScalingEndpoint)
		asg.WithoutSDKRetries(o)
	})
}

// FleetGroups returns the fleets' Auto Scaling Groups as scaling capacity,
// from FLEETQ_FLEET_GROUPS.
func (e *Env) FleetGroups() (scaler.Groups, error) {
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
	return scaler.Groups{Adapter: asg.New(e.AutoScaling(), asg.Options{}), Names: names}, nil
}

// Store returns the job store on the function's table.
func (e *Env) Store() *store.Store {
	return store.New(e.DynamoDB(), store.Options{Table: e.Table, Config: e.Config, Logger: e.Logger})
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
