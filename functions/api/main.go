// Command api is the worker, producer and operator HTTP API as a Lambda
// function behind an API Gateway HTTP API (payload format 2.0). The handler
// is pkg/api's net/http handler; aws-lambda-go-api-proxy translates the
// events, so the Lambda serves exactly what `fleetq dev` serves.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fleetq/fleetq/pkg/api"
	"github.com/fleetq/fleetq/pkg/assets"
	"github.com/fleetq/fleetq/pkg/auth"
	"github.com/fleetq/fleetq/pkg/awsenv"
	"github.com/fleetq/fleetq/pkg/jobevents"
	"github.com/fleetq/fleetq/pkg/lambdaenv"
	"github.com/fleetq/fleetq/pkg/sqsqueue"
)

func main() {
	handler, err := newHandler(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
	lambda.Start(httpadapter.NewV2(handler).ProxyWithContext)
}

func newHandler(ctx context.Context) (http.Handler, error) {
	env, err := lambdaenv.Load(ctx, os.Getenv, os.Stderr)
	if err != nil {
		return nil, err
	}
	queueURL, err := env.Require(awsenv.EnvSubmitQueueURL)
	if err != nil {
		return nil, err
	}
	param, err := env.Require(awsenv.EnvFleetSecretParam)
	if err != nil {
		return nil, err
	}
	st := env.Store()
	var events api.Announcer
	if bus := env.Lookup(awsenv.EnvEventBus); bus != "" {
		events = &jobevents.Relay{Outbox: st, Publisher: jobevents.EventBridge{Client: env.EventBridge(), Bus: bus}, Logger: env.Logger}
	}
	var files api.Assets
	if bucket := env.Lookup(awsenv.EnvBucket); bucket != "" {
		files = &assets.S3{Presign: s3.NewPresignClient(env.S3()), Bucket: bucket}
	}
	return api.New(api.Options{
		Config:      env.Config,
		Store:       st,
		Events:      events,
		Assets:      files,
		Queue:       sqsqueue.Queue{Client: env.SQS(), URL: queueURL},
		FleetSecret: &auth.SSMSecret{Client: env.SSM(), Name: param},
		Operator:    auth.IAMOperator{},
		Logger:      env.Logger,
	}), nil
}
