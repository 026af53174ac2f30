//go:build !agent

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/fleetq/fleetq/pkg/aws/preflight"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

func init() {
	register("smoke", "run one tiny job through a stage's fleet and print its timeline", runSmoke)
}

func runSmoke(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := operatorFlags(fs)
	stage := fs.String("stage", "dev", "stage to test; without --api its API URL is read from the stack fleetq-<stage>")
	configFile := fs.String("config", "", "fleet config file of the stage (default: the built-in one)")
	workflow := fs.String("workflow", "", "workflow to run (default: the first workflow of the stage's first fleet)")
	tenant := fs.String("tenant", "smoke", "tenant id of the job: smoke makes a key of this tenant for the run (the operator routes), submits with it to the key API and revokes it after")
	keyAPI := fs.String("key-api", env("KEY_API", ""), "the key API's URL, where the job is submitted with a tenant's API key (env FLEETQ_KEY_API; default: the stack's KeyApiUrl output without --api, else --api)")
	input := fs.String("input", `{"seconds": 1}`, "the job's input, a JSON object: a tiny one your workflow's runner accepts")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up after this long (a fleet at zero must boot an instance first)")
	interval := fs.Duration("interval", 5*time.Second, "time between two looks at the job")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !json.Valid([]byte(*input)) {
		fmt.Fprintln(stderr, "fleetq smoke: --input is not JSON")
		return 2
	}
	if *workflow == "" {
		cfg, err := stageConfig(*stage, *configFile)
		if err != nil {
			fmt.Fprintln(stderr, "fleetq smoke:", err)
			return 2
		}
		for _, f := range cfg.Fleets {
			if len(f.Workflows) > 0 {
				*workflow = f.Workflows[0]
				break
			}
		}
		if *workflow == "" {
			fmt.Fprintln(stderr, "fleetq smoke: no fleet of the stage serves a workflow: pass --workflow")
			return 2
		}
	}
	if !set["api"] && env("API", "") == "" {
		outputs, err := stackOutputs(ctx, *stage, "ApiUrl", "KeyApiUrl")
		if err != nil {
			fmt.Fprintln(stderr, "fleetq smoke:", err)
			return 1
		}
		c.api = outputs["ApiUrl"]
		if *keyAPI == "" {
			*keyAPI = outputs["KeyApiUrl"]
		}
	}
	if *keyAPI == "" {
		*keyAPI = c.api // the dev stack serves every route on one URL
	}

	// The job goes in as a tenant's would, with an API key on the key API:
	// whoever may call the operator routes (who deployed the stack) can run
	// it without being listed anywhere.
	producer := &operatorClient{api: *keyAPI, apiKey: c.apiKey, http: c.http}
	if producer.apiKey == "" {
		key, revoke, err := smokeKey(ctx, c, *tenant)
		if err != nil {
			fmt.Fprintln(stderr, "fleetq smoke: make a key for tenant "+*tenant+":", err)
			return 1
		}
		defer revoke(stderr)
		producer.apiKey = key
	}
	req := wire.SubmitRequest{WorkflowID: *workflow, Input: json.RawMessage(*input),
		JobID: fmt.Sprintf("smoke-%d", time.Now().UnixMilli())}
	var sub wire.JobStatusResponse
	if err := producer.send(ctx, http.MethodPost, wire.PathJobs, req, &sub, false, nil); err != nil {
		fmt.Fprintln(stderr, "fleetq smoke: submit:", err)
		return 1
	}
	fmt.Fprintf(stdout, "submitted %s (workflow %s) to %s; waiting up to %s\n", sub.JobID, *workflow, producer.api, *timeout)
	j, err := producer.wait(ctx, sub.JobID, *timeout, *interval)
	if err != nil {
		fmt.Fprintln(stderr, "fleetq smoke:", err)
		return 1
	}
	printTimeline(stdout, j)
	if j.Status != "succeeded" {
		return exitJobFailed
	}
	return 0
}

// stageConfig is the fleet config of a stage: its built-in one, or the
// file given, which must be that stage's.
func stageConfig(stage, file string) (*fleetconfig.Config, error) {
	if file == "" {
		return fleetconfig.ForStage(stage)
	}
	cfg, err := fleetconfig.Load(file)
	if err == nil && cfg.Stage != stage {
		err = fmt.Errorf("%s is the config of stage %q, not %q", file, cfg.Stage, stage)
	}
	return cfg, err
}

// smokeKey makes an API key of tenant for one smoke run, through the
// operator routes, and answers a function that revokes it.
func smokeKey(ctx context.Context, operator *operatorClient, tenant string) (string, func(io.Writer), error) {
	var created wire.CreateKeyResponse
	req := wire.CreateKeyRequest{TenantID: tenant, Name: "fleetq smoke", ExpiresInSeconds: int64(smokeKeyLifetime / time.Second)}
	if err := operator.send(ctx, http.MethodPost, wire.PathAdminKeys, req, &created, false, nil); err != nil {
		return "", nil, err
	}
	revoke := func(stderr io.Writer) {
		path := strings.Replace(wire.PathAdminKeyRevoke, "{key_id}", created.APIKey.KeyID, 1)
		var out wire.KeyResponse
		// A fresh context: the run's may have timed out, the key must go.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := operator.send(ctx, http.MethodPost, path, wire.Empty{}, &out, false, nil); err != nil {
			fmt.Fprintf(stderr, "fleetq smoke: revoke the run's key %s: %v (it expires by itself within %s)\n", created.APIKey.Prefix, err, smokeKeyLifetime)
		}
	}
	return created.Key, revoke, nil
}

// smokeKeyLifetime bounds a smoke run's key should its revocation fail.
const smokeKeyLifetime = 24 * time.Hour

// stackOutputs reads the named outputs of the stage's stack.
func stackOutputs(ctx context.Context, stage string, names ...string) (map[string]string, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("no --api, and no AWS configuration to find the stack's: %w", err)
	}
	outputs, res := preflight.StackOutputs(ctx, cloudformation.NewFromConfig(awsCfg), stage)
	if res.Status != preflight.OK {
		return nil, errors.New(res.Message)
	}
	for _, n := range names {
		if outputs[n] == "" {
			return nil, fmt.Errorf("stack %s has no %s output", preflight.StackName(stage), n)
		}
	}
	return outputs, nil
}

// printTimeline writes each transition of the job with its time since the
// job was created, then how long it waited for a worker and ran.
func printTimeline(w io.Writer, j wire.Job) {
	at := func(s *string) (time.Time, bool) {
		if s == nil {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, *s)
		return t, err == nil
	}
	start, ok := at(j.CreatedAt)
	fmt.Fprintf(w, "job %s: %s", j.JobID, j.Status)
	if j.Reason != "" && j.Reason != j.Status {
		fmt.Fprintf(w, " (%s)", j.Reason)
	}
	fmt.Fprintf(w, ", fleet %s, %d attempt(s), %d preemption(s)\n", j.FleetSlug, j.Attempts, j.Preemptions)
	var firstLease, end time.Time
	for _, h := range j.History {
		t, tok := at(h.At)
		offset := "?"
		if ok && tok {
			offset = fmt.Sprintf("+%.1fs", t.Sub(start).Seconds())
		}
		line := fmt.Sprintf("  %-9s %s", offset, h.To)
		if h.Reason != "" && h.Reason != h.To {
			line += " (" + h.Reason + ")"
		}
		if h.Worker != "" {
			line += " worker " + h.Worker
		}
		if h.Attempt > 0 {
			line += fmt.Sprintf(" attempt %d", h.Attempt)
		}
		fmt.Fprintln(w, line)
		if h.To == "leased" && firstLease.IsZero() && tok {
			firstLease = t
		}
		if finished(h.To) && tok {
			end = t
		}
	}
	if ok && !firstLease.IsZero() && !end.IsZero() {
		fmt.Fprintf(w, "waited %.1fs for a worker, ran %.1fs, %.1fs in all\n",
			firstLease.Sub(start).Seconds(), end.Sub(firstLease).Seconds(), end.Sub(start).Seconds())
	}
	if r := strings.TrimSpace(string(j.Result)); r != "" && r != "null" {
		if len(r) > 512 {
			r = r[:512] + "…"
		}
		fmt.Fprintf(w, "result: %s\n", r)
	}
	if j.Error != nil {
		fmt.Fprintf(w, "error: %s %s\n", j.Error.Code, j.Error.Message)
	}
}
