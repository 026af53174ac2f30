package system

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/jobevent"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/lib/logging"
	"github.com/fleetq/fleetq/pkg/service/jobevents"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// Lambda is a function's environment in AWS: the variables the stack sets,
// the AWS configuration, clients that honour the endpoint overrides, and the
// Env every function is built from. Each function's main is StartLambda of
// the Function its package under pkg/service/system declares.
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
	log, err := logging.New(logOut, level)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", awsenv.EnvLogLevel, err)
	}
	if l.AWS, err = awsenv.Load(ctx); err != nil {
		return nil, err
	}
	l.Table = table
	log = log.With("stage", cfg.Stage)
	var events jobevent.Publisher
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

// Endpoint sets a client's endpoint from the override variable name (a
// FLEETQ_*_ENDPOINT) when it is set, and answers whether it did; else the
// client keeps the endpoint the SDK resolved (from
// AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL or the shared config).
func (e *Lambda) Endpoint(name string, base **string) bool {
	if v := e.Lookup(name); v != "" {
		*base = aws.String(v)
		return true
	}
	return false
}

// DynamoDB returns a DynamoDB client (FLEETQ_DYNAMODB_ENDPOINT overrides the
// endpoint). The DynamoDB, SQS and EventBridge clients retry with their
// service's awsenv.Retries; Secrets Manager, S3 and EC2 keep the SDK's
// default retryer, and Auto Scaling retries in pkg/aws/asg. The clients
// only some functions use are built by their packages (apifn, scalerfn).
func (e *Lambda) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(e.AWS, func(o *dynamodb.Options) {
		e.Endpoint(awsenv.EnvDynamoDBEndpoint, &o.BaseEndpoint)
		o.Retryer = awsenv.Retryer(awsenv.DynamoDB)
	})
}

// SecretsManager returns a Secrets Manager client (FLEETQ_SECRETSMANAGER_ENDPOINT overrides the endpoint).
func (e *Lambda) SecretsManager() *secretsmanager.Client {
	return secretsmanager.NewFromConfig(e.AWS, func(o *secretsmanager.Options) { e.Endpoint(awsenv.EnvSecretsManagerEndpoint, &o.BaseEndpoint) })
}

// KeyRotationWindow is how long a signing key's previous version still
// verifies after a rotation, for the console's keys (the API) and the
// webhooks' (the scaler): the longest a console session lasts
// (console.MaxSessionTTL, which a test keeps it equal to), so a rotation
// signs nobody out (rotate twice to end every session at once).
const KeyRotationWindow = 12 * time.Hour

// EventBridge returns an EventBridge client (FLEETQ_EVENTBRIDGE_ENDPOINT overrides the endpoint).
func (e *Lambda) EventBridge() *eventbridge.Client {
	return eventbridge.NewFromConfig(e.AWS, func(o *eventbridge.Options) {
		e.Endpoint(awsenv.EnvEventBridgeEndpoint, &o.BaseEndpoint)
		o.Retryer = awsenv.Retryer(awsenv.EventBridge)
	})
}

// AutoScaling returns an Auto Scaling client (FLEETQ_AUTOSCALING_ENDPOINT
// overrides the endpoint) with the SDK's own retries off: pkg/aws/asg retries
// throttling itself, and the two would multiply.
func (e *Lambda) AutoScaling() *autoscaling.Client {
	return autoscaling.NewFromConfig(e.AWS, func(o *autoscaling.Options) {
		e.Endpoint(awsenv.EnvAutoScalingEndpoint, &o.BaseEndpoint)
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

// Subnets reads FLEETQ_SUBNETS, the scaler's: the subnets of the fleets'
// groups with their zones, which it drops and restores in Spot groups.
func (e *Lambda) Subnets(groups *scaler.Groups) error {
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
