package preflight

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// QuotaClass is one EC2 vCPU quota: the instance families it counts and
// its Service Quotas codes for Spot requests and running On-Demand
// instances (service code ec2; docs/deploy.md cites where they come from).
type QuotaClass struct {
	Name     string
	Families *regexp.Regexp
	Spot     string
	OnDemand string
}

// QuotaClasses are the vCPU quotas the checks know. An instance type of
// another family is reported, not checked.
var QuotaClasses = []QuotaClass{
	{Name: "G and VT", Families: regexp.MustCompile(`^(g|vt)\d`), Spot: "L-3819A6DF", OnDemand: "L-DB2E81BA"},
	{Name: "P", Families: regexp.MustCompile(`^p\d`), Spot: "L-7212CCBC", OnDemand: "L-417A185B"},
	{Name: "Standard (A, C, D, H, I, M, R, T, Z)", Families: regexp.MustCompile(`^[acdhimrtz]\d`), Spot: "L-34B43A08", OnDemand: "L-1216C47A"},
}

// classOf returns the quota class of an instance type, or nil.
func classOf(instanceType string) *QuotaClass {
	for i := range QuotaClasses {
		if QuotaClasses[i].Families.MatchString(instanceType) {
			return &QuotaClasses[i]
		}
	}
	return nil
}

// quotaCheck names the check of one market's quota class.
func quotaCheck(market string, c QuotaClass) string { return market + " " + c.Name + " quota" }

// need is the vCPUs one quota class must allow and which fleets ask for them.
type need struct {
	vcpus int
	parts []string
}

// needs sums, per quota class, what the fleets may run at once: each
// fleet's max_instances times the largest vCPU count among its instance
// types of that class (the group may launch any of them).
func needs(fleets []fleetconfig.Fleet, types map[string]TypeInfo) (map[string]*need, []string) {
	out := map[string]*need{}
	var unknown []string
	for _, f := range fleets {
		largest := map[string]int{}
		for _, t := range f.InstanceTypes {
			c := classOf(t)
			if c == nil {
				unknown = append(unknown, t)
				continue
			}
			largest[c.Name] = max(largest[c.Name], types[t].VCPUs)
		}
		for class, v := range largest {
			n := out[class]
			if n == nil {
				n = &need{}
				out[class] = n
			}
			n.vcpus += f.MaxInstances * v
			n.parts = append(n.parts, fmt.Sprintf("%s %d × %d vCPUs", f.Slug, f.MaxInstances, v))
		}
	}
	return out, unknown
}

// SpotQuotas checks each Spot vCPU quota the fleets draw on against what
// they may run at once.
func SpotQuotas(ctx context.Context, q Quotas, cfg *fleetconfig.Config, types map[string]TypeInfo) []Result {
	return quotas(ctx, q, cfg.Region, "Spot", cfg.Fleets, types, func(c QuotaClass) string { return c.Spot })
}

// OnDemandQuotas checks the On-Demand vCPU quotas of the fleets that have
// an On-Demand rung (their whole max_instances may fall back to it).
func OnDemandQuotas(ctx context.Context, q Quotas, cfg *fleetconfig.Config, types map[string]TypeInfo) []Result {
	var fleets []fleetconfig.Fleet
	for _, f := range cfg.Fleets {
		if f.OnDemand.Enabled() {
			fleets = append(fleets, f)
		}
	}
	return quotas(ctx, q, cfg.Region, "On-Demand", fleets, types, func(c QuotaClass) string { return c.OnDemand })
}

func quotas(ctx context.Context, q Quotas, region, market string, fleets []fleetconfig.Fleet, types map[string]TypeInfo, code func(QuotaClass) string) []Result {
	ns, unknown := needs(fleets, types)
	var out []Result
	for _, c := range QuotaClasses {
		n, used := ns[c.Name]
		if !used {
			continue
		}
		check := quotaCheck(market, c)
		qc := code(c)
		res, err := q.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String("ec2"), QuotaCode: aws.String(qc)})
		if err != nil || res.Quota == nil {
			out = append(out, fail(check, "%s: %v: check the credentials may call servicequotas:GetServiceQuota", qc, errText(err)))
			continue
		}
		have := int(aws.ToFloat64(res.Quota.Value))
		if have < n.vcpus {
			out = append(out, fail(check, "%s allows %d vCPUs, the fleets may run %d (%s): aws service-quotas request-service-quota-increase --region %s --service-code ec2 --quota-code %s --desired-value %d",
				qc, have, n.vcpus, strings.Join(n.parts, " + "), region, qc, n.vcpus))
			continue
		}
		out = append(out, ok(check, "%s allows %d vCPUs, the fleets may run %d (%s)", qc, have, n.vcpus, strings.Join(n.parts, " + ")))
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		out = append(out, Result{market + " quota", Skip, fmt.Sprintf("no vCPU quota known for %s: check it in the Service Quotas console", strings.Join(slices.Compact(unknown), ", "))})
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return "no quota in the answer"
	}
	return awsMessage(err)
}

// archList maps each of names to the architectures its instance type supports.
func archList(types map[string]TypeInfo, names []string) map[string][]string {
	out := map[string][]string{}
	for _, n := range names {
		out[n] = types[n].Architectures
	}
	return out
}

// AMI resolves a fleet's image (ami_id, or the SSM parameter
// ami_ssm_parameter names) and checks its architecture runs on every
// instance type of the fleet.
func AMI(ctx context.Context, p Parameters, c EC2, f fleetconfig.Fleet, types map[string]TypeInfo) Result {
	check := "ami " + f.Slug
	id, from := f.AMIID, "ami_id"
	if id == "" {
		if f.AMISSMParameter == "" {
			return fail(check, "fleet %s has neither ami_id nor ami_ssm_parameter", f.Slug)
		}
		out, err := p.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(f.AMISSMParameter)})
		switch {
		case isCode(err, "ParameterNotFound"):
			return fail(check, "%v: ami_ssm_parameter %s does not resolve in this region; publish the image's id there or set ami_id", awsMessage(err), f.AMISSMParameter)
		case err != nil:
			// It could not look: the image may well be published.
			return fail(check, "%v: could not read ami_ssm_parameter %s: check the credentials may call ssm:GetParameter on it", awsMessage(err), f.AMISSMParameter)
		}
		id, from = aws.ToString(out.Parameter.Value), f.AMISSMParameter
	}
	out, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil && !isCode(err, "InvalidAMIID.NotFound") && !isCode(err, "InvalidAMIID.Malformed") {
		return fail(check, "%s (from %s): %v: could not look the image up: check the credentials may call ec2:DescribeImages", id, from, errText(err))
	}
	if err != nil || len(out.Images) == 0 {
		return fail(check, "%s (from %s): %v: share or copy the image to this account and region", id, from, errText(err))
	}
	im := out.Images[0]
	arch := string(im.Architecture)
	if im.State != "available" {
		return fail(check, "%s (from %s) is %s, not available", id, from, im.State)
	}
	var wrong []string
	for t, archs := range archList(types, f.InstanceTypes) {
		if types != nil && !slices.Contains(archs, arch) {
			wrong = append(wrong, fmt.Sprintf("%s (%s)", t, strings.Join(archs, "/")))
		}
	}
	sort.Strings(wrong)
	if len(wrong) > 0 {
		return fail(check, "%s (from %s) is %s but instance types %s cannot run it: use an image of their architecture or other instance types", id, from, arch, strings.Join(wrong, ", "))
	}
	return ok(check, "%s (from %s), %s", id, from, arch)
}
