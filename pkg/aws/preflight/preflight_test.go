package preflight_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/preflight"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

const amiParam = "/fleetq/test/ami"

// env is a healthy account: every check passes until a test breaks one thing.
type env struct {
	acct *localaws.Account
	json *localaws.JSONAPI
	api  *httptest.Server
	cfg  *fleetconfig.Config
	deps preflight.Deps
}

func newEnv(t *testing.T, extraYAML string) *env {
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
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What the API function answers for a path it does not serve.
		wire.WriteError(w, &wire.Error{Status: http.StatusNotFound, Code: wire.CodeNotFound, Message: "no route " + r.URL.Path})
	}))
	t.Cleanup(api.Close)

	cfg, err := fleetconfig.Parse("test.yaml", []byte(`stage: test
region: us-east-1
network: {vpc_cidr: 10.0.0.0/16}
fleets:
  - slug: sdxl
    workflows: [a]
    max_instances: 4
    instance_types: [g5.xlarge, g5.2xlarge]
    ami_ssm_parameter: `+amiParam+`
    accept_secret: true
`+extraYAML))
	if err != nil {
		t.Fatal(err)
	}

	acct.PutIdentity("local", localaws.Identity{Account: "123456789012", Arn: "arn:aws:iam::123456789012:user/ops", UserID: "AIDA"})
	acct.PutStack(localaws.Stack{Name: "CDKToolkit", Status: "UPDATE_COMPLETE", Outputs: map[string]string{"BootstrapVersion": "21"}})
	acct.PutInstanceType(localaws.InstanceType{Name: "g5.xlarge", VCPUs: 4, Architectures: []string{"x86_64"}})
	acct.PutInstanceType(localaws.InstanceType{Name: "g5.2xlarge", VCPUs: 8, Architectures: []string{"x86_64"}})
	acct.PutInstanceType(localaws.InstanceType{Name: "g5g.xlarge", VCPUs: 4, Architectures: []string{"arm64"}})
	acct.PutImage(localaws.Image{ID: "ami-0123456789abcdef0", Architecture: "x86_64"})
	js.PutParameter(amiParam, "ami-0123456789abcdef0")
	js.PutServiceQuota("ec2", "L-3819A6DF", 32) // 4 × 8 vCPUs fit exactly
	js.PutServiceQuota("ec2", "L-DB2E81BA", 32)
	secretARN := "arn:aws:secretsmanager:us-east-1:123456789012:secret:SdxlFleetSecret-abc"
	js.PutSecretValue(secretARN, "s3cret")
	acct.PutStack(localaws.Stack{Name: "fleetq-test", Status: "CREATE_COMPLETE", Outputs: map[string]string{
		"FleetSecretArns": `{"sdxl":"` + secretARN + `"}`, "ApiUrl": api.URL,
	}})

	base := awsenv.Static("us-east-1")
	endpoint := func(u string) *string { return aws.String(u) }
	e := &env{acct: acct, json: js, api: api, cfg: cfg}
	e.deps = preflight.Deps{
		Identity: sts.NewFromConfig(localaws.Config(acct.URL)),
		Stacks:   cloudformation.NewFromConfig(localaws.Config(acct.URL)),
		EC2:      ec2.NewFromConfig(localaws.Config(acct.URL)),
		Quotas: servicequotas.NewFromConfig(base, func(o *servicequotas.Options) {
			o.BaseEndpoint = endpoint(js.URL)
		}),
		Parameters: ssm.NewFromConfig(base, func(o *ssm.Options) { o.BaseEndpoint = endpoint(js.URL) }),
		Secrets:    secretsmanager.NewFromConfig(base, func(o *secretsmanager.Options) { o.BaseEndpoint = endpoint(js.URL) }),
		HTTP:       api.Client(),
		SDKRegion:  "us-east-1",
	}
	return e
}

func (e *env) run(t *testing.T) []preflight.Result {
	t.Helper()
	rs := preflight.Run(context.Background(), e.cfg, e.deps)
	for _, r := range rs {
		t.Logf("%-5s %-22s %s", r.Status, r.Check, r.Message)
	}
	return rs
}

// only returns the result of one check, failing the test unless it is there once.
func only(t *testing.T, rs []preflight.Result, check string) preflight.Result {
	t.Helper()
	var found []preflight.Result
	for _, r := range rs {
		if r.Check == check {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %q result, got %d in %+v", check, len(found), rs)
	}
	return found[0]
}

func expect(t *testing.T, r preflight.Result, status preflight.Status, says ...string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("%s: status %s, want %s (%s)", r.Check, r.Status, status, r.Message)
	}
	for _, s := range says {
		if !strings.Contains(r.Message, s) {
			t.Errorf("%s: message %q does not say %q", r.Check, r.Message, s)
		}
	}
}

func TestHealthyAccountPassesEveryCheck(t *testing.T) {
	e := newEnv(t, "")
	rs := e.run(t)
	if preflight.Failed(rs) {
		t.Fatal("a healthy account failed a check")
	}
	expect(t, only(t, rs, "credentials"), preflight.OK, "123456789012", "arn:aws:iam::123456789012:user/ops")
	expect(t, only(t, rs, "region"), preflight.OK, "us-east-1")
	expect(t, only(t, rs, "cdk bootstrap"), preflight.OK, "version 21")
	expect(t, only(t, rs, "Spot G and VT quota"), preflight.OK, "L-3819A6DF allows 32 vCPUs, the fleets may run 32", "sdxl 4 × 8 vCPUs")
	expect(t, only(t, rs, "ami sdxl"), preflight.OK, "ami-0123456789abcdef0", amiParam, "x86_64")
	expect(t, only(t, rs, "fleet secret sdxl"), preflight.OK, "SdxlFleetSecret-abc")
	expect(t, only(t, rs, "api"), preflight.OK, "404")
	for _, r := range rs {
		if strings.HasPrefix(r.Check, "On-Demand") {
			t.Errorf("a fleet without an On-Demand rung got an On-Demand check: %+v", r)
		}
	}
}

func TestCredentialsRefused(t *testing.T) {
	e := newEnv(t, "")
	e.deps.Identity = sts.NewFromConfig(localaws.Config(e.acct.URL), func(o *sts.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider("AKIAEXPIRED", "x", "")
	})
	rs := e.run(t)
	expect(t, only(t, rs, "credentials"), preflight.Fail, "InvalidClientTokenId", "configure AWS credentials")
	if !preflight.Failed(rs) {
		t.Error("Failed says nothing failed")
	}
}

func TestRegionMismatchAndMissing(t *testing.T) {
	e := newEnv(t, "")
	e.deps.SDKRegion = "eu-west-1"
	expect(t, only(t, e.run(t), "region"), preflight.Fail, "eu-west-1", "export AWS_REGION=us-east-1")
	e.deps.SDKRegion = ""
	expect(t, only(t, e.run(t), "region"), preflight.Fail, "no AWS region configured", "export AWS_REGION=us-east-1")
}

func TestBootstrapMissingFailedOrOld(t *testing.T) {
	cases := []struct {
		name  string
		stack *localaws.Stack
		says  string
	}{
		{"missing", nil, "npx aws-cdk@2 bootstrap aws://ACCOUNT/us-east-1"},
		{"rolled back", &localaws.Stack{Name: "CDKToolkit", Status: "ROLLBACK_COMPLETE", Outputs: map[string]string{"BootstrapVersion": "21"}}, "is ROLLBACK_COMPLETE"},
		{"old", &localaws.Stack{Name: "CDKToolkit", Status: "CREATE_COMPLETE", Outputs: map[string]string{"BootstrapVersion": "4"}}, "version 4 is older than 6"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "")
			acct, err := localaws.StartAccount("")
			if err != nil {
				t.Fatal(err)
			}
			defer acct.Close()
			if c.stack != nil {
				acct.PutStack(*c.stack)
			}
			e.deps.Stacks = cloudformation.NewFromConfig(localaws.Config(acct.URL))
			rs := e.run(t)
			expect(t, only(t, rs, "cdk bootstrap"), preflight.Fail, c.says)
			// Without the stage's stack, the checks that need it wait for the
			// deploy, which the stack's line says once.
			expect(t, only(t, rs, "stack"), preflight.Skip, "not deployed yet", "make deploy STAGE=test")
			expect(t, only(t, rs, "fleet secret sdxl"), preflight.Skip, "see stack")
			expect(t, only(t, rs, "api"), preflight.Skip, "see stack")
		})
	}
}

func TestSpotQuotaBelowWhatTheFleetsMayRun(t *testing.T) {
	e := newEnv(t, `  - slug: small
    workflows: [b]
    max_instances: 2
    instance_types: [g5.xlarge]
    ami_ssm_parameter: `+amiParam+`
`)
	// 4 × 8 + 2 × 4 = 40 vCPUs on one quota; 32 is short.
	expect(t, only(t, e.run(t), "Spot G and VT quota"), preflight.Fail,
		"allows 32 vCPUs, the fleets may run 40", "sdxl 4 × 8 vCPUs + small 2 × 4 vCPUs",
		"request-service-quota-increase --region us-east-1 --service-code ec2 --quota-code L-3819A6DF --desired-value 40")

	e.json.PutServiceQuota("ec2", "L-3819A6DF", 0) // a new account
	expect(t, only(t, e.run(t), "Spot G and VT quota"), preflight.Fail, "allows 0 vCPUs")
}

func TestOnDemandQuotaForFleetsWithARung(t *testing.T) {
	e := newEnv(t, "    on_demand: {fallback_after: 10m}\n")
	expect(t, only(t, e.run(t), "On-Demand G and VT quota"), preflight.OK, "L-DB2E81BA allows 32 vCPUs, the fleets may run 32")
	e.json.PutServiceQuota("ec2", "L-DB2E81BA", 8)
	expect(t, only(t, e.run(t), "On-Demand G and VT quota"), preflight.Fail, "L-DB2E81BA allows 8 vCPUs", "--desired-value 32")
}

func TestUnknownInstanceType(t *testing.T) {
	e := newEnv(t, `  - slug: typo
    workflows: [b]
    instance_types: [g5.huge]
    ami_ssm_parameter: `+amiParam+`
`)
	expect(t, only(t, e.run(t), "instance types"), preflight.Fail, "InvalidInstanceType", "g5.huge")
}

func TestAMIParameterMissingImageMissingOrOtherArchitecture(t *testing.T) {
	e := newEnv(t, "")
	e.json.PutParameter(amiParam, "ami-0fffffffffffffff0")
	expect(t, only(t, e.run(t), "ami sdxl"), preflight.Fail, "InvalidAMIID.NotFound", "ami-0fffffffffffffff0")

	e.acct.PutImage(localaws.Image{ID: "ami-0fffffffffffffff0", Architecture: "arm64"})
	expect(t, only(t, e.run(t), "ami sdxl"), preflight.Fail, "is arm64", "g5.2xlarge (x86_64)", "g5.xlarge (x86_64)")

	e.cfg.Fleets[0].AMISSMParameter = "/fleetq/test/nothing-here"
	expect(t, only(t, e.run(t), "ami sdxl"), preflight.Fail, "ParameterNotFound", "/fleetq/test/nothing-here")
}

func TestSecretGoneOrStackWithoutOutputs(t *testing.T) {
	e := newEnv(t, "")
	e.acct.PutStack(localaws.Stack{Name: "fleetq-test", Status: "UPDATE_COMPLETE", Outputs: map[string]string{
		"FleetSecretArns": `{"sdxl":"arn:aws:secretsmanager:us-east-1:123456789012:secret:Deleted-xyz"}`, "ApiUrl": e.api.URL,
	}})
	expect(t, only(t, e.run(t), "fleet secret sdxl"), preflight.Fail, "ResourceNotFoundException", "make deploy recreates it")

	e.acct.PutStack(localaws.Stack{Name: "fleetq-test", Status: "UPDATE_COMPLETE"})
	rs := e.run(t)
	expect(t, only(t, rs, "fleet secret sdxl"), preflight.Fail, "names no secret of fleet sdxl")

	// A fleet whose workers attest has no secret to check.
	e.cfg.Fleets[0].AcceptSecret = false
	for _, r := range e.run(t) {
		if strings.HasPrefix(r.Check, "fleet secret") {
			t.Errorf("a fleet without accept_secret checked: %+v", r)
		}
	}
	expect(t, only(t, rs, "api"), preflight.Fail, "no ApiUrl output")
}

func TestAPINotAnsweringAsTheAPI(t *testing.T) {
	e := newEnv(t, "")
	// API Gateway's own answer when no function is behind the route.
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"message":"Internal Server Error"}`))
	}))
	defer gw.Close()
	out := map[string]string{"FleetSecretArns": `{"sdxl":"arn:aws:secretsmanager:us-east-1:123456789012:secret:SdxlFleetSecret-abc"}`, "ApiUrl": gw.URL}
	e.acct.PutStack(localaws.Stack{Name: "fleetq-test", Status: "UPDATE_COMPLETE", Outputs: out})
	expect(t, only(t, e.run(t), "api"), preflight.Fail, "answered 500", "Internal Server Error", "make build ran before make deploy")

	gw.Close() // nothing listens any more
	expect(t, only(t, e.run(t), "api"), preflight.Fail, "check the network path")
}
