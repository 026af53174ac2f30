package awsenv

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/middleware"
)

// Endpoint environment variables, one per service.
const (
	EnvDynamoDBEndpoint    = "FLEETQ_DYNAMODB_ENDPOINT"
	EnvSQSEndpoint         = "FLEETQ_SQS_ENDPOINT"
	EnvS3Endpoint          = "FLEETQ_S3_ENDPOINT"
	EnvSSMEndpoint         = "FLEETQ_SSM_ENDPOINT"
	EnvAutoScalingEndpoint = "FLEETQ_AUTOSCALING_ENDPOINT"
	EnvEventBridgeEndpoint = "FLEETQ_EVENTBRIDGE_ENDPOINT"
	EnvEC2Endpoint         = "FLEETQ_EC2_ENDPOINT"
	// EnvSecretsManagerEndpoint overrides Secrets Manager's endpoint.
	EnvSecretsManagerEndpoint = "FLEETQ_SECRETSMANAGER_ENDPOINT"
)

// Load returns the default AWS configuration (environment, shared config,
// instance or Lambda role).
func Load(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	return cfg, nil
}

// Endpoint returns the override for a service from its variable, or nil.
func Endpoint(envVar string) *string {
	if v := os.Getenv(envVar); v != "" {
		return aws.String(v)
	}
	return nil
}

// Static returns a configuration for a local endpoint: a fixed region and
// dummy credentials, no shared config files read.
func Static(region string) aws.Config {
	if region == "" {
		region = "us-east-1"
	}
	return aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
	}
}

// CountRequests is SDK middleware that adds one to n per API call attempt.
// Benchmarks use it to count the DynamoDB requests a workflow costs.
func CountRequests(n *atomic.Int64) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("fleetqCountRequests",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				n.Add(1)
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
}

// Variables every fleetq function reads. The CDK app sets them; the local
// stack passes the same values in-process.
const (
	// EnvStage names the stage; its built-in config/<stage>.yaml is used
	// unless EnvConfigFile names another file.
	EnvStage      = "FLEETQ_STAGE"
	EnvConfigFile = "FLEETQ_CONFIG_FILE"
	// EnvTable is the DynamoDB table name.
	EnvTable = "FLEETQ_TABLE"
	// EnvSubmitQueueURL is the SQS submission queue.
	EnvSubmitQueueURL = "FLEETQ_SUBMIT_QUEUE_URL"
	// EnvConsoleKeyARN is the Secrets Manager secret operator console
	// sessions are signed with (the stack generates it; the API reads it).
	EnvConsoleKeyARN = "FLEETQ_CONSOLE_KEY_ARN"
	// EnvWebhookKeyARN is the Secrets Manager secret job callbacks are
	// signed with (the stack generates it; the scaler, which delivers
	// them, reads it).
	EnvWebhookKeyARN = "FLEETQ_WEBHOOK_KEY_ARN"
	// EnvFleetSecrets maps each fleet that accepts a secret (accept_secret)
	// to its Secrets Manager secret's ARN, as a JSON object (the API reads it).
	EnvFleetSecrets = "FLEETQ_FLEET_SECRETS"
	// EnvWorkerRoles maps each fleet's slug to its worker role's ARN, as a
	// JSON object: the API admits attested registrations into a fleet from
	// its role only (unset: no attested registration).
	EnvWorkerRoles = "FLEETQ_WORKER_ROLES"
	// EnvSTSEndpoint is where the API forwards attested registrations'
	// identity requests (default the region's STS endpoint); workers sign
	// for the same endpoint.
	EnvSTSEndpoint = "FLEETQ_STS_ENDPOINT"
	// EnvBucket is the S3 bucket for job inputs and outputs.
	EnvBucket = "FLEETQ_BUCKET"
	// EnvEventBus is the EventBridge bus job lifecycle events go to.
	EnvEventBus = "FLEETQ_EVENT_BUS"
	// EnvLogLevel is debug, info (default), warn or error.
	EnvLogLevel = "FLEETQ_LOG_LEVEL"
	// EnvFleetGroups maps each fleet's slug to its Auto Scaling Group's
	// name, as a JSON object (the scaler and dispatch's wake read it).
	EnvFleetGroups = "FLEETQ_FLEET_GROUPS"
	// EnvFleetOnDemandGroups maps the slug of each fleet with an On-Demand
	// rung to its On-Demand Auto Scaling Group's name, as a JSON object
	// (the scaler reads it; unset when no fleet has the rung).
	EnvFleetOnDemandGroups = "FLEETQ_FLEET_ON_DEMAND_GROUPS"
	// EnvSubnets lists the subnets of the fleets' groups with their zones,
	// as a JSON list of {"subnet", "zone"} (the scaler reads it to drop and
	// restore the zones of Spot groups; unset: it leaves subnets alone).
	EnvSubnets = "FLEETQ_SUBNETS"
)
