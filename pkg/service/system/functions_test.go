package system_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/service/console"
	"github.com/fleetq/fleetq/pkg/service/system"
	"github.com/fleetq/fleetq/pkg/service/system/apifn"
	"github.com/fleetq/fleetq/pkg/service/system/scalerfn"
)

// build builds fn as its main does, with vars as its whole environment.
func build(fn system.Function, vars map[string]string) (any, error) {
	return system.BuildLambda(context.Background(), fn, func(k string) string { return vars[k] }, io.Discard, io.Discard)
}

// Each function asks for the key it signs with, by its own variable: the
// API for console sessions, the scaler (which delivers job callbacks) for
// webhooks when the stage allows any. Neither takes a fleet's secret for it.
func TestFunctionsNeedTheirOwnSigningKeys(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	dir := t.TempDir()
	data, _ := os.ReadFile("../../../config/dev.yaml")
	hooks := filepath.Join(dir, "hooks.yaml")
	if err := os.WriteFile(hooks, append(data, []byte("\nwebhooks:\n  allowed_hosts: [hooks.example.com]\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{
		awsenv.EnvStage: "dev", awsenv.EnvConfigFile: hooks, awsenv.EnvSubmitQueueURL: "https://sqs.example/q",
		awsenv.EnvFleetGroups:  `{"demo":"fleetq-dev-demo"}`,
		awsenv.EnvEventBus:     "fleetq-dev-jobs",
		awsenv.EnvFleetSecrets: `{"demo":"arn:aws:secretsmanager:us-east-1:1:secret:DemoFleetSecret"}`,
	}
	if _, err := build(apifn.Function, base); err == nil || !strings.Contains(err.Error(), awsenv.EnvConsoleKeyARN) {
		t.Errorf("the API without its console key: %v, want an error naming %s", err, awsenv.EnvConsoleKeyARN)
	}
	if _, err := build(scalerfn.Function, base); err == nil || !strings.Contains(err.Error(), awsenv.EnvWebhookKeyARN) {
		t.Errorf("the scaler of a stage with webhooks, without its webhook key: %v, want an error naming %s", err, awsenv.EnvWebhookKeyARN)
	}
	base[awsenv.EnvConsoleKeyARN] = "arn:aws:secretsmanager:us-east-1:1:secret:ConsoleKey"
	base[awsenv.EnvWebhookKeyARN] = "arn:aws:secretsmanager:us-east-1:1:secret:WebhookKey"
	if _, err := build(apifn.Function, base); err != nil {
		t.Errorf("the API with its key: %v", err)
	}
	if _, err := build(scalerfn.Function, base); err != nil {
		t.Errorf("the scaler with its key: %v", err)
	}
}

// A fleet that accepts a secret must have one: the API does not start
// without it, and names the variable.
func TestAPINeedsEachAcceptingFleetsSecret(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	base := map[string]string{
		awsenv.EnvStage: "dev", awsenv.EnvSubmitQueueURL: "https://sqs.example/q",
		awsenv.EnvEventBus:      "fleetq-dev-jobs",
		awsenv.EnvConsoleKeyARN: "arn:aws:secretsmanager:us-east-1:1:secret:ConsoleKey",
	}
	if _, err := build(apifn.Function, base); err == nil || !strings.Contains(err.Error(), awsenv.EnvFleetSecrets) {
		t.Fatalf("the API without demo's secret: %v, want an error naming %s", err, awsenv.EnvFleetSecrets)
	}
}

// The clients only the API uses honour the SDK's standard endpoint
// variables too; S3 is addressed by virtual host unless FLEETQ_S3_ENDPOINT
// names a local server.
func TestAPIClientsHonourTheStandardEndpointVariables(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
	l, err := system.LoadLambda(context.Background(), awsenv.API, func(k string) string {
		if k == awsenv.EnvStage {
			return "dev"
		}
		return ""
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]*string{"SQS": apifn.SQS(l).Options().BaseEndpoint, "S3": apifn.S3(l).Options().BaseEndpoint} {
		if got == nil || *got != "http://127.0.0.1:4566" {
			t.Errorf("%s endpoint %v, want http://127.0.0.1:4566", name, got)
		}
	}
	if apifn.S3(l).Options().UsePathStyle {
		t.Error("S3 uses path-style addressing without FLEETQ_S3_ENDPOINT")
	}
}

// A signing key's previous version verifies as long as the longest console
// session lasts, so a rotation signs nobody out.
func TestKeyRotationWindowIsTheLongestSession(t *testing.T) {
	if system.KeyRotationWindow != console.MaxSessionTTL {
		t.Fatalf("KeyRotationWindow %v, console.MaxSessionTTL %v", system.KeyRotationWindow, console.MaxSessionTTL)
	}
}
