package preflight_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/preflight"
	"github.com/fleetq/fleetq/pkg/domain/wire"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// noFleets is an API that cannot be read as an operator.
type noFleets struct{}

func (noFleets) Fleets(context.Context, string) ([]wire.Fleet, error) {
	return nil, &wire.Error{Status: 403, Code: wire.CodePermissionDenied, Message: "not an operator"}
}

func (noFleets) Workers(context.Context, string, string) ([]wire.Worker, error) {
	return nil, &wire.Error{Status: 403, Code: wire.CodePermissionDenied, Message: "not an operator"}
}

// onePerCheck fails unless rs holds exactly one verdict per planned check.
func onePerCheck(t *testing.T, rs []preflight.Result, planned []string) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range rs {
		seen[r.Check]++
	}
	for _, p := range planned {
		if seen[p] != 1 {
			t.Errorf("check %q has %d lines, want 1", p, seen[p])
		}
	}
	if len(rs) != len(planned) {
		t.Errorf("%d lines for %d checks", len(rs), len(planned))
	}
}

// TestWithoutCredentialsTheProblemIsSaidOnce: with credentials STS
// refuses, doctor says so once, in the credentials line; every check that
// needs AWS is one skip line pointing at it, the quota and runner checks
// included.
func TestWithoutCredentialsTheProblemIsSaidOnce(t *testing.T) {
	e := newEnv(t, "")
	e.deps.Identity = sts.NewFromConfig(localaws.Config(e.acct.URL), func(o *sts.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider("AKIAEXPIRED", "x", "")
	})
	e.deps.Fleets, e.deps.Workers = noFleets{}, noFleets{}
	rs := e.run(t)
	planned := preflight.Planned(e.cfg, true)
	onePerCheck(t, rs, planned)
	expect(t, only(t, rs, "credentials"), preflight.Fail, "InvalidClientTokenId")
	expect(t, only(t, rs, "region"), preflight.OK)
	for _, name := range []string{"cdk bootstrap", "instance types", "Spot G and VT quota", "ami sdxl", "stack", "fleet secret sdxl", "api", "runner sdxl"} {
		expect(t, only(t, rs, name), preflight.Skip, "needs AWS credentials")
	}
	told := 0
	for _, r := range rs {
		if strings.Contains(r.Message, "InvalidClientTokenId") {
			told++
		}
	}
	if told != 1 {
		t.Errorf("the credential problem is told %d times", told)
	}
}

// TestChecksThatCannotRunAreSkippedNotDropped: without the instance types
// the quota checks are skip lines, without the stack the secret, API and
// runner checks are, each pointing at the check it needs; an API that
// cannot be read as an operator is a skip per fleet.
func TestChecksThatCannotRunAreSkippedNotDropped(t *testing.T) {
	e := newEnv(t, `  - slug: typo
    workflows: [b]
    instance_types: [g5.huge]
    ami_ssm_parameter: `+amiParam+`
`)
	e.deps.Fleets, e.deps.Workers = noFleets{}, noFleets{}
	rs := e.run(t)
	onePerCheck(t, rs, preflight.Planned(e.cfg, true))
	expect(t, only(t, rs, "instance types"), preflight.Fail, "g5.huge")
	expect(t, only(t, rs, "Spot G and VT quota"), preflight.Skip, "see instance types")
	expect(t, only(t, rs, "runner sdxl"), preflight.Skip, "operator policy")
	expect(t, only(t, rs, "runner typo"), preflight.Skip, "see runner sdxl")
	expect(t, only(t, rs, "stage-secret agents typo"), preflight.Skip, "operator policy") // sdxl accepts a secret of its own

	e.cfg.Stage = "undeployed" // its stack fleetq-undeployed does not exist
	rs = e.run(t)
	onePerCheck(t, rs, preflight.Planned(e.cfg, true))
	expect(t, only(t, rs, "stack"), preflight.Skip, "not deployed yet")
	for _, name := range []string{"fleet secret sdxl", "api", "runner sdxl", "runner typo", "stage-secret agents typo"} {
		expect(t, only(t, rs, name), preflight.Skip, "see stack")
	}
}

// TestAnAMIThatCouldNotBeLookedUpIsNotCalledMissing: SSM refusing the
// read (no permission) is not a parameter that does not exist: doctor
// says it could not look, and does not advise publishing the image.
func TestAnAMIThatCouldNotBeLookedUpIsNotCalledMissing(t *testing.T) {
	e := newEnv(t, "")
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"AccessDeniedException","message":"User is not authorized to perform: ssm:GetParameter"}`))
	}))
	t.Cleanup(denied.Close)
	e.deps.Parameters = ssm.NewFromConfig(awsenv.Static("us-east-1"), func(o *ssm.Options) { o.BaseEndpoint = aws.String(denied.URL) })
	r := only(t, e.run(t), "ami sdxl")
	expect(t, r, preflight.Fail, "AccessDeniedException", "could not read", "ssm:GetParameter")
	if strings.Contains(r.Message, "publish") || strings.Contains(r.Message, "does not resolve") {
		t.Errorf("a read that was refused is told as a missing image: %s", r.Message)
	}
}
