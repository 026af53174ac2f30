package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// TestDoctorPrintsEachCheckAndExitsNonZeroOnFailure runs the command with
// the SDK's default configuration pointed at local AWS APIs through the
// standard AWS_ENDPOINT_URL_<SERVICE> variables.
func TestDoctorPrintsEachCheckAndExitsNonZeroOnFailure(t *testing.T) {
	acct, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	defer acct.Close()
	js, err := localaws.StartJSONAPI("")
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wire.WriteError(w, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Message: "no route"})
	}))
	defer api.Close()

	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "doc.yaml")
	if err := os.WriteFile(cfgFile, []byte(`stage: doc
region: eu-west-1
network: {vpc_cidr: 10.0.0.0/16}
fleets:
  - slug: gpu
    workflows: [a]
    max_instances: 2
    instance_types: [g5.xlarge]
    ami_id: ami-0123456789abcdef0
    accept_secret: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	acct.PutIdentity("AKIADOCTOR", localaws.Identity{Account: "123456789012", Arn: "arn:aws:iam::123456789012:user/ops"})
	acct.PutStack(localaws.Stack{Name: "CDKToolkit", Status: "CREATE_COMPLETE", Outputs: map[string]string{"BootstrapVersion": "21"}})
	acct.PutInstanceType(localaws.InstanceType{Name: "g5.xlarge", VCPUs: 4, Architectures: []string{"x86_64"}})
	acct.PutImage(localaws.Image{ID: "ami-0123456789abcdef0", Architecture: "x86_64"})
	acct.PutStack(localaws.Stack{Name: "fleetq-doc", Status: "CREATE_COMPLETE", Outputs: map[string]string{"FleetSecretArns": `{"gpu":"arn:secret"}`, "ApiUrl": api.URL}})
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
