package preflight

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// Identity is the STS call the credentials check makes.
type Identity interface {
	GetCallerIdentity(ctx context.Context, in *sts.GetCallerIdentityInput, optFns ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error)
}

// Stacks is the CloudFormation call the bootstrap and stack checks make.
type Stacks interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, optFns ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// Quotas is the Service Quotas call the quota checks make.
type Quotas interface {
	GetServiceQuota(ctx context.Context, in *servicequotas.GetServiceQuotaInput, optFns ...func(*servicequotas.Options)) (*servicequotas.GetServiceQuotaOutput, error)
}

// EC2 is the EC2 calls the quota and AMI checks make.
type EC2 interface {
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// Parameters is the SSM call the AMI check makes.
type Parameters interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// Secrets is the Secrets Manager call the fleet secret checks make.
type Secrets interface {
	DescribeSecret(ctx context.Context, in *secretsmanager.DescribeSecretInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.DescribeSecretOutput, error)
}

// Deps are the clients the checks call and the region the SDK resolved.
type Deps struct {
	Identity   Identity
	Stacks     Stacks
	Quotas     Quotas
	EC2        EC2
	Parameters Parameters
	Secrets    Secrets
	HTTP       *http.Client
	// Fleets, when set, reads the fleets' boot reports through the API
	// (BootProblems).
	Fleets FleetViews
	// Workers, when set, reads the fleets' workers through the API
	// (StageSecretAgents).
	Workers WorkerViews
	// SDKRegion is the region the AWS SDK's configuration resolved (env,
	// profile); empty when it resolved none.
	SDKRegion string
}

// Status is a check's verdict.
type Status string

// The verdicts. Skip is for a check that cannot run yet (the stack is not
// deployed); it does not fail the run.
const (
	OK   Status = "ok"
	Fail Status = "FAIL"
	Skip Status = "skip"
)

// Result is one check's verdict and what it found or what to do.
type Result struct {
	Check   string
	Status  Status
	Message string
}

func ok(check, format string, args ...any) Result {
	return Result{check, OK, fmt.Sprintf(format, args...)}
}

func fail(check, format string, args ...any) Result {
	return Result{check, Fail, fmt.Sprintf(format, args...)}
}

// Failed reports whether any result failed.
func Failed(rs []Result) bool {
	return slices.ContainsFunc(rs, func(r Result) bool { return r.Status == Fail })
}

// StackName is the CloudFormation stack of a stage (infra names it so).
func StackName(stage string) string { return "fleetq-" + stage }

// The CDK bootstrap stack and the oldest bootstrap version whose assets
// and roles CDK v2 templates accept (their CheckBootstrapVersion rule
// refuses versions 1 to 5).
const (
	BootstrapStack      = "CDKToolkit"
	MinBootstrapVersion = 6
)

// Run runs every check for the stage cfg describes, in order, and returns
// one verdict per check (Planned names them). A check that cannot run
// because an earlier one failed or skipped (no credentials, no instance
// types, no stack) is a Skip naming that check, so its problem is said
// once. It never changes anything.
func Run(ctx context.Context, cfg *fleetconfig.Config, d Deps) []Result {
	planned := Planned(cfg, d.Fleets != nil && d.Workers != nil)
	creds := Credentials(ctx, d.Identity)
	out := []Result{creds, Region(cfg, d.SDKRegion)}
	if creds.Status != OK {
		return skipRest(out, planned, "needs AWS credentials: see credentials")
	}
	out = append(out, Bootstrap(ctx, d.Stacks, cfg.Region))
	types, err := DescribeTypes(ctx, d.EC2, cfg)
	if err != nil {
		out = append(out, fail(checkTypes, "%v: check the fleets' instance_types exist in %s", awsMessage(err), cfg.Region))
	} else {
		out = append(out, ok(checkTypes, "%d instance types in %s", len(types), cfg.Region))
		out = append(out, SpotQuotas(ctx, d.Quotas, cfg, types)...)
		out = append(out, OnDemandQuotas(ctx, d.Quotas, cfg, types)...)
	}
	for _, f := range cfg.Fleets {
		out = append(out, AMI(ctx, d.Parameters, d.EC2, f, types))
	}
	outputs, res := StackOutputs(ctx, d.Stacks, cfg.Stage)
	out = append(out, res)
	if res.Status == OK {
		out = append(out, FleetSecrets(ctx, d.Secrets, cfg, outputs["FleetSecretArns"])...)
		out = append(out, API(ctx, d.HTTP, outputs["ApiUrl"]))
		if d.Fleets != nil {
			out = append(out, BootProblems(ctx, d.Fleets, outputs["ApiUrl"], cfg)...)
		}
		if d.Workers != nil {
			out = append(out, StageSecretAgents(ctx, d.Workers, outputs["ApiUrl"], cfg)...)
		}
	}
	return skipRest(out, planned, "")
}

// The names of the checks that do not name a fleet or a quota.
const (
	checkCredentials = "credentials"
	checkRegion      = "region"
	checkBootstrap   = "cdk bootstrap"
	checkTypes       = "instance types"
	checkStack       = "stack"
	checkAPI         = "api"
)

// Planned names every check Run makes for cfg, in order (withFleets: the
// runner and stage-secret agents checks, which read the API as an
// operator). A new check adds its
// name here and its call in Run; a check Run could not reach is listed as
// skipped with the reason.
func Planned(cfg *fleetconfig.Config, withFleets bool) []string {
	out := []string{checkCredentials, checkRegion, checkBootstrap, checkTypes}
	for _, market := range []string{"Spot", "On-Demand"} {
		for _, c := range QuotaClasses {
			for _, f := range cfg.Fleets {
				if market == "On-Demand" && !f.OnDemand.Enabled() {
					continue
				}
				if slices.ContainsFunc(f.InstanceTypes, func(t string) bool { k := classOf(t); return k != nil && k.Name == c.Name }) {
					out = append(out, quotaCheck(market, c))
					break
				}
			}
		}
	}
	for _, f := range cfg.Fleets {
		out = append(out, "ami "+f.Slug)
	}
	out = append(out, checkStack)
	for _, f := range cfg.Fleets {
		if f.AcceptSecret {
			out = append(out, "fleet secret "+f.Slug)
		}
	}
	out = append(out, checkAPI)
	if withFleets {
		for _, f := range cfg.Fleets {
			out = append(out, runnerCheck(f.Slug))
		}
		for _, f := range cfg.Fleets {
			if !f.AcceptSecret {
				out = append(out, stageSecretCheck(f.Slug))
			}
		}
	}
	return out
}

// skipRest adds a Skip for each planned check without a verdict in out,
// saying why: reason, or the earlier check it needs.
func skipRest(out []Result, planned []string, reason string) []Result {
	have := map[string]bool{}
	for _, r := range out {
		have[r.Check] = true
	}
	for _, name := range planned {
		if have[name] {
			continue
		}
		why := reason
		if why == "" {
			why = waitsFor(name)
		}
		out = append(out, Result{name, Skip, why})
	}
	return out
}

// waitsFor says which earlier check a check that did not run waits for.
func waitsFor(check string) string {
	switch {
	case strings.HasSuffix(check, " quota"):
		return "needs the instance types' vCPUs: see instance types"
	case strings.HasPrefix(check, "fleet secret "), check == checkAPI, strings.HasPrefix(check, "runner "), strings.HasPrefix(check, stageSecretCheck("")):
		return "needs the stage's stack: see stack"
	}
	return "not run"
}

// Credentials asks STS who the caller is.
func Credentials(ctx context.Context, id Identity) Result {
	out, err := id.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	var ae smithy.APIError
	switch {
	case err != nil && !errors.As(err, &ae):
		// No answer from STS: the SDK found no credentials to sign with
		// (its error lists every source it tried), or STS was not reached.
		msg := err.Error()
		return fail(checkCredentials, "no usable AWS credentials (%s): configure them (aws configure sso, or AWS_PROFILE) for the stage's account", msg[strings.LastIndex(msg, ": ")+2:])
	case err != nil:
		return fail(checkCredentials, "%v: configure AWS credentials (aws configure sso, or AWS_PROFILE) for the stage's account", awsMessage(err))
	}
	return ok("credentials", "account %s as %s", aws.ToString(out.Account), aws.ToString(out.Arn))
}

// Region compares the config's region with the SDK's.
func Region(cfg *fleetconfig.Config, sdkRegion string) Result {
	switch {
	case cfg.Region == "":
		return fail("region", "%s names no region: set region: in the stage's config", cfg.Source())
	case sdkRegion == "":
		return fail("region", "no AWS region configured: export AWS_REGION=%s", cfg.Region)
	case sdkRegion != cfg.Region:
		return fail("region", "the AWS configuration's region is %s but %s deploys to %s: export AWS_REGION=%s", sdkRegion, cfg.Source(), cfg.Region, cfg.Region)
	}
	return ok("region", "%s", cfg.Region)
}

// Bootstrap checks the CDK bootstrap stack is deployed and recent enough.
func Bootstrap(ctx context.Context, st Stacks, region string) Result {
	const check = "cdk bootstrap"
	out, err := st.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(BootstrapStack)})
	if err != nil || len(out.Stacks) == 0 {
		if isCode(err, "ValidationError") || err == nil {
			return fail(check, "the account is not bootstrapped in %s: npx aws-cdk@2 bootstrap aws://ACCOUNT/%s", region, region)
		}
		return fail(check, "%v: check the credentials may call cloudformation:DescribeStacks", awsMessage(err))
	}
	s := out.Stacks[0]
	if !usable(string(s.StackStatus)) {
		return fail(check, "stack %s is %s: fix or delete it in the CloudFormation console, then npx aws-cdk@2 bootstrap", BootstrapStack, s.StackStatus)
	}
	v := 0
	for _, o := range s.Outputs {
		if aws.ToString(o.OutputKey) == "BootstrapVersion" {
			v, _ = strconv.Atoi(aws.ToString(o.OutputValue))
		}
	}
	if v < MinBootstrapVersion {
		return fail(check, "bootstrap version %d is older than %d: npx aws-cdk@2 bootstrap aws://ACCOUNT/%s upgrades it", v, MinBootstrapVersion, region)
	}
	return ok(check, "%s version %d", BootstrapStack, v)
}

// usable says whether a stack in this status can be read and updated.
func usable(status string) bool {
	switch status {
	case "CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE", "IMPORT_ROLLBACK_COMPLETE":
		return true
	}
	return false
}

// TypeInfo is what the checks need of an instance type.
type TypeInfo struct {
	VCPUs         int
	Architectures []string // as EC2 names them: x86_64, arm64
}

// DescribeTypes describes every instance type of the stage's fleets.
func DescribeTypes(ctx context.Context, c EC2, cfg *fleetconfig.Config) (map[string]TypeInfo, error) {
	var names []string
	for _, f := range cfg.Fleets {
		for _, t := range f.InstanceTypes {
			if !slices.Contains(names, t) {
				names = append(names, t)
			}
		}
	}
	out := map[string]TypeInfo{}
	if len(names) == 0 {
		return out, nil
	}
	in := &ec2.DescribeInstanceTypesInput{}
	for _, n := range names {
		in.InstanceTypes = append(in.InstanceTypes, ec2types.InstanceType(n))
	}
	p := ec2.NewDescribeInstanceTypesPaginator(c, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range page.InstanceTypes {
			info := TypeInfo{}
			if t.VCpuInfo != nil {
				info.VCPUs = int(aws.ToInt32(t.VCpuInfo.DefaultVCpus))
			}
			if t.ProcessorInfo != nil {
				for _, a := range t.ProcessorInfo.SupportedArchitectures {
					info.Architectures = append(info.Architectures, string(a))
				}
			}
			out[string(t.InstanceType)] = info
		}
	}
	return out, nil
}

// StackOutputs reads the stage's stack outputs. A stack not deployed yet
// is a Skip: the checks that need it cannot run before the first deploy.
func StackOutputs(ctx context.Context, st Stacks, stage string) (map[string]string, Result) {
	name := StackName(stage)
	out, err := st.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil || len(out.Stacks) == 0 {
		if err == nil || isCode(err, "ValidationError") {
			return nil, Result{"stack", Skip, fmt.Sprintf("stack %s is not deployed yet: make deploy STAGE=%s, then run doctor again", name, stage)}
		}
		return nil, fail("stack", "%v: check the credentials may call cloudformation:DescribeStacks", awsMessage(err))
	}
	outputs := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return outputs, ok("stack", "%s is %s", name, out.Stacks[0].StackStatus)
}

// FleetSecrets checks the own secret of each fleet that accepts one
// (accept_secret) exists: the stack names them in its FleetSecretArns
// output, a JSON object of fleet slug to secret ARN. Fleets whose workers
// attest have none, and no check.
func FleetSecrets(ctx context.Context, sm Secrets, cfg *fleetconfig.Config, output string) []Result {
	arns := map[string]string{}
	if output != "" {
		if err := json.Unmarshal([]byte(output), &arns); err != nil {
			arns = map[string]string{}
		}
	}
	var out []Result
	for _, f := range cfg.Fleets {
		if !f.AcceptSecret {
			continue
		}
		check := "fleet secret " + f.Slug
		arn := arns[f.Slug]
		if arn == "" {
			out = append(out, fail(check, "the stack's FleetSecretArns output names no secret of fleet %s: deploy the stage with this config (make deploy)", f.Slug))
			continue
		}
		d, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(arn)})
		switch {
		case err != nil:
			out = append(out, fail(check, "%v: fleet %s's secret %s is gone; make deploy recreates it", awsMessage(err), f.Slug, arn))
		case d.DeletedDate != nil:
			out = append(out, fail(check, "%s is scheduled for deletion: aws secretsmanager restore-secret --secret-id %s", arn, arn))
		default:
			out = append(out, ok(check, "%s", aws.ToString(d.Name)))
		}
	}
	return out
}

// API checks the stage's API answers: a GET of its root reaches the API
// function through the gateway's default route, which answers any path it
// does not serve in the API's error shape. Any other answer (API Gateway's
// own {"message": ...}, a network error) means the function is not behind
// the URL.
func API(ctx context.Context, hc *http.Client, baseURL string) Result {
	const check = "api"
	if baseURL == "" {
		return fail(check, "the stack has no ApiUrl output: deploy the stage with this version (make deploy)")
	}
	url := strings.TrimRight(baseURL, "/") + "/"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fail(check, "bad ApiUrl %q: %v", baseURL, err)
	}
	res, err := hc.Do(req)
	if err != nil {
		return fail(check, "GET %s: %v: check the network path to API Gateway", url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var body wire.ErrorBody
	if res.StatusCode < 300 || (json.Unmarshal(raw, &body) == nil && body.Error.Code != "") {
		return ok(check, "%s answers (GET / → %d)", baseURL, res.StatusCode)
	}
	return fail(check, "GET %s answered %d %s, not the API's own answer: check the API function's logs (/aws/lambda/fleetq-…-api) and that make build ran before make deploy",
		url, res.StatusCode, strings.TrimSpace(string(raw)))
}

// isCode reports whether err is an AWS API error with the given code.
func isCode(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}

// awsMessage shortens an SDK error to the service's code and message.
func awsMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return err.Error()
}
