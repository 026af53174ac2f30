package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/local/devstack"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// TestDoctorPrintsEachCheckAndExitsNonZeroOnFailure runs the command with
// the SDK's default configuration pointed at local AWS APIs through the
// standard AWS_ENDPOINT_URL_<SERVICE> variables.
func TestDoctorPrintsEachCheckAndExitsNonZeroOnFailure(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wire.WriteError(w, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Message: "no route"})
	}))
	defer api.Close()
	cfgFile, js := doctorAccount(t, doctorConfig, api.URL)

	var out, errOut bytes.Buffer
	if code := runCLI(context.Background(), []string{"doctor", "--stage", "doc", "--config", cfgFile}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d on a healthy account:\n%s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"ok    credentials", "ok    region", "ok    cdk bootstrap", "ok    Spot G and VT quota", "ok    ami gpu", "ok    fleet secret gpu", "ok    api"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	js.PutServiceQuota("ec2", "L-3819A6DF", 0)
	out.Reset()
	if code := runCLI(context.Background(), []string{"doctor", "--stage", "doc", "--config", cfgFile}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d with no Spot quota, want 1:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "FAIL  Spot G and VT quota") || !strings.Contains(out.String(), "--desired-value 8") {
		t.Errorf("the quota failure does not say what to do:\n%s", out.String())
	}
}

const doctorConfig = `stage: doc
region: eu-west-1
network: {vpc_cidr: 10.0.0.0/16}
fleets:
  - slug: gpu
    workflows: [a]
    max_instances: 2
    instance_types: [g5.xlarge]
    ami_id: ami-0123456789abcdef0
    accept_secret: true
`

// doctorAccount points the SDK's default configuration at local AWS APIs
// through the standard AWS_ENDPOINT_URL_<SERVICE> variables: an account
// where every check passes for the config cfgText (written to the file it
// answers), whose stack's ApiUrl is apiURL.
func doctorAccount(t *testing.T, cfgText, apiURL string) (string, *localaws.JSONAPI) {
	t.Helper()
	acct, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acct.Close() })
	js, err := localaws.StartJSONAPI("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.Close() })
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "doc.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	acct.PutIdentity("AKIADOCTOR", localaws.Identity{Account: "123456789012", Arn: "arn:aws:iam::123456789012:user/ops"})
	acct.PutStack(localaws.Stack{Name: "CDKToolkit", Status: "CREATE_COMPLETE", Outputs: map[string]string{"BootstrapVersion": "21"}})
	acct.PutInstanceType(localaws.InstanceType{Name: "g5.xlarge", VCPUs: 4, Architectures: []string{"x86_64"}})
	acct.PutImage(localaws.Image{ID: "ami-0123456789abcdef0", Architecture: "x86_64"})
	acct.PutStack(localaws.Stack{Name: "fleetq-doc", Status: "CREATE_COMPLETE", Outputs: map[string]string{"FleetSecretArns": `{"gpu":"arn:secret"}`, "ApiUrl": apiURL}})
	js.PutSecretValue("arn:secret", "x")
	js.PutServiceQuota("ec2", "L-3819A6DF", 8)

	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIADOCTOR")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "x")
	t.Setenv("AWS_REGION", "eu-west-1")
	for _, svc := range []string{"STS", "CLOUDFORMATION", "EC2"} {
		t.Setenv("AWS_ENDPOINT_URL_"+svc, acct.URL)
	}
	for _, svc := range []string{"SERVICE_QUOTAS", "SSM", "SECRETS_MANAGER"} {
		t.Setenv("AWS_ENDPOINT_URL_"+svc, js.URL)
	}
	return cfgFile, js
}

// A fleet whose instances said at boot that their image lacks the runner
// fails doctor with what they said and their image: the reports go
// through the API's boot-report route on the dev stack, and doctor reads
// them back as an operator.
func TestDoctorReportsAFleetWhoseImageLacksItsRunner(t *testing.T) {
	cfg, err := fleetconfig.Parse("doc.yaml", []byte(doctorConfig))
	if err != nil {
		t.Fatal(err)
	}
	stack, err := devstack.Start(context.Background(), devstack.Options{Addr: "127.0.0.1:0", Config: cfg,
		Logger: slog.New(slog.DiscardHandler), OperatorToken: "op-token", Fleet: devstack.FleetOptions{Tick: -1, NoLocalFleet: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Close() })
	cfgFile, _ := doctorAccount(t, doctorConfig, stack.URL)
	doctor := func() (int, string) {
		var out, errOut bytes.Buffer
		code := runCLI(context.Background(), []string{"doctor", "--stage", "doc", "--config", cfgFile, "--operator-token", "op-token"}, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	if code, out := doctor(); code != 0 || !strings.Contains(out, "ok    runner gpu") {
		t.Fatalf("exit %d before any report:\n%s", code, out)
	}
	const missing = "exec runner: /opt/render/bin/run-scene does not exist on this machine: install it in the image"
	report := func(worker, image, message string) {
		t.Helper()
		body, _ := json.Marshal(wire.BootReportRequest{WorkerID: worker, FleetSlug: "gpu", Stage: "doc", ImageID: image,
			Problem: wire.BootProblemRunnerMissing, Message: message})
		req, _ := http.NewRequest(http.MethodPost, stack.URL+wire.PathBootReport, bytes.NewReader(body))
		req.Header.Set(wire.HeaderFleetSecret, stack.FleetSecrets["gpu"])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("boot report: %d", res.StatusCode)
		}
	}
	report("i-0aaa", "ami-0bad", missing)
	report("i-0bbb", "ami-0bad", missing)
	report("i-0ccc", "ami-0old", "exec runner: run-scene is not on this machine's PATH")
	code, out := doctor()
	if code != 1 {
		t.Fatalf("exit %d with instances missing their runner, want 1:\n%s", code, out)
	}
	want := "FAIL  runner gpu               fleet gpu: 2 instances report runner missing: " + missing + " (image ami-0bad); " +
		"1 instance reports: exec runner: run-scene is not on this machine's PATH (image ami-0old): bake the runner into the fleet's image"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks\n%s\n%s", want, out)
	}
	// Without an operator credential the check is a skip line per fleet, not a failure.
	var o, e bytes.Buffer
	if code := runCLI(context.Background(), []string{"doctor", "--stage", "doc", "--config", cfgFile, "--operator-token", "wrong"}, &o, &e); code != 0 ||
		!strings.Contains(o.String(), "skip  runner gpu") || !strings.Contains(o.String(), "unauthenticated") {
		t.Errorf("exit %d with a wrong operator token:\n%s%s", code, o.String(), e.String())
	}
}

// Without credentials doctor says so once and prints every other check as
// one skip line pointing at it, the quota and runner checks included,
// instead of one long credential error per check.
func TestDoctorWithoutCredentialsSaysSoOnce(t *testing.T) {
	cfgFile, _ := doctorAccount(t, doctorConfig, "http://127.0.0.1:1")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	var out, errOut bytes.Buffer
	if code := runCLI(context.Background(), []string{"doctor", "--stage", "doc", "--config", cfgFile}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d without credentials, want 1:\n%s%s", code, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	fails, skips := 0, 0
	for _, l := range lines[1:] {
		switch {
		case strings.HasPrefix(l, "FAIL  credentials") && strings.Contains(l, "no usable AWS credentials"):
			fails++
		case strings.HasPrefix(l, "skip  ") && strings.HasSuffix(l, "needs AWS credentials: see credentials"):
			skips++
		case strings.HasPrefix(l, "ok    region"), strings.HasPrefix(l, "some checks failed"):
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	for _, want := range []string{"skip  Spot G and VT quota", "skip  runner gpu", "skip  ami gpu", "skip  api"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if fails != 1 || skips < 8 {
		t.Fatalf("%d credential failures and %d skips:\n%s", fails, skips, out.String())
	}
}
