//go:build !agent

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/fleetq/fleetq/pkg/aws/preflight"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

func init() {
	register("doctor", "check an AWS account can run a stage: credentials, bootstrap, GPU quotas, AMIs, secret, API (read-only)", runDoctor)
}

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stage := fs.String("stage", "dev", "stage to check (its built-in config/<stage>.yaml unless --config)")
	configFile := fs.String("config", "", "fleet config file of the stage (default: the built-in one)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	token := fs.String("operator-token", env("OPERATOR_TOKEN", ""), "operator bearer token of the dev stack, to read the fleets' boot reports (env FLEETQ_OPERATOR_TOKEN); empty: sign with AWS credentials (SigV4)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := stageConfig(*stage, *configFile)
	if err != nil {
		fmt.Fprintln(stderr, "fleetq doctor:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "fleetq doctor: AWS configuration:", err)
		return 2
	}
	sdkRegion := awsCfg.Region
	// Every other check looks at the region the stage deploys to.
	awsCfg.Region = cfg.Region
	results := preflight.Run(ctx, cfg, preflight.Deps{
		Identity:   sts.NewFromConfig(awsCfg),
		Stacks:     cloudformation.NewFromConfig(awsCfg),
		Quotas:     servicequotas.NewFromConfig(awsCfg),
		EC2:        ec2.NewFromConfig(awsCfg),
		Parameters: ssm.NewFromConfig(awsCfg),
		Secrets:    secretsmanager.NewFromConfig(awsCfg),
		HTTP:       &http.Client{Timeout: 15 * time.Second},
		Fleets:     fleetViews{token: *token, region: cfg.Region},
		Workers:    fleetViews{token: *token, region: cfg.Region},
		SDKRegion:  sdkRegion,
	})
	fmt.Fprintf(stdout, "fleetq doctor: stage %s (%s) in %s\n", cfg.Stage, cfg.Source(), cfg.Region)
	for _, r := range results {
		fmt.Fprintf(stdout, "%-4s  %-24s %s\n", r.Status, r.Check, r.Message)
	}
	if preflight.Failed(results) {
		fmt.Fprintln(stdout, "some checks failed: see what to do above")
		return 1
	}
	return 0
}

// fleetViews reads GET /api/admin/fleets as an operator: with the dev
// stack's token, else signed with the default AWS credentials.
type fleetViews struct{ token, region string }

func (v fleetViews) Fleets(ctx context.Context, apiURL string) ([]wire.Fleet, error) {
	c := &operatorClient{api: apiURL, token: v.token, region: v.region, http: &http.Client{Timeout: 15 * time.Second}}
	var out wire.FleetsResponse
	if err := c.get(ctx, wire.PathAdminFleets, &out); err != nil {
		return nil, err
	}
	return out.Fleets, nil
}

func (v fleetViews) Workers(ctx context.Context, apiURL, fleet string) ([]wire.Worker, error) {
	c := &operatorClient{api: apiURL, token: v.token, region: v.region, http: &http.Client{Timeout: 15 * time.Second}}
	var out wire.WorkersResponse
	if err := c.get(ctx, wire.PathAdminWorkers+"?fleet="+url.QueryEscape(fleet), &out); err != nil {
		return nil, err
	}
	return out.Workers, nil
}
