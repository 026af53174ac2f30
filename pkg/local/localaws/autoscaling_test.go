package localaws_test

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"

	"github.com/fleetq/fleetq/pkg/local/localaws"
)

func startAutoScaling(t *testing.T) *localaws.AutoScaling {
	t.Helper()
	a, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func TestAutoScalingErrorResponseShape(t *testing.T) {
	a := startAutoScaling(t)
	a.Throttle("DescribeAutoScalingGroups", 1)
	resp, err := http.PostForm(a.URL, url.Values{"Action": {"DescribeAutoScalingGroups"}, "Version": {"2011-01-01"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status = %d, want 400", resp.StatusCode)
	}
	var e struct {
		XMLName   xml.Name `xml:"ErrorResponse"`
		Error     struct{ Type, Code, Message string }
		RequestID string `xml:"RequestId"`
	}
	if err := xml.Unmarshal(body, &e); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if e.Error.Type != "Sender" || e.Error.Code != "Throttling" || e.Error.Message != "Rate exceeded" || e.RequestID == "" {
		t.Fatalf("error = %+v from %s", e, body)
	}
	// The injected failure is used up: the next request is served.
	resp, err = http.PostForm(a.URL, url.Values{"Action": {"DescribeAutoScalingGroups"}, "Version": {"2011-01-01"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("second status = %d, want 200", resp.StatusCode)
	}
}

func TestAutoScalingRefusesUnknownActionAndVersion(t *testing.T) {
	a := startAutoScaling(t)
	for _, form := range []url.Values{
		{"Action": {"CreateAutoScalingGroup"}, "Version": {"2011-01-01"}},
		{"Action": {"DescribeAutoScalingGroups"}, "Version": {"2010-08-01"}},
	} {
		resp, err := http.PostForm(a.URL, form)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "<ErrorResponse") {
			t.Errorf("%v: %d %s", form, resp.StatusCode, body)
		}
	}
}

func TestAutoScalingDescribePagesThroughSDKPaginator(t *testing.T) {
	a := startAutoScaling(t)
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		a.PutGroup(localaws.ASGGroup{Name: n, Max: 1})
	}
	client := autoscaling.NewFromConfig(localaws.Config(a.URL))
	p := autoscaling.NewDescribeAutoScalingGroupsPaginator(client, &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: aws.Int32(2)})
	var names []string
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, g := range out.AutoScalingGroups {
			names = append(names, aws.ToString(g.AutoScalingGroupName))
		}
	}
	if pages != 3 || strings.Join(names, ",") != "a,b,c,d,e" {
		t.Fatalf("pages = %d, names = %v", pages, names)
	}
}

func TestAutoScalingSetDesiredValidatesBounds(t *testing.T) {
	a := startAutoScaling(t)
	a.PutGroup(localaws.ASGGroup{Name: "g", Min: 1, Max: 3, Desired: 1})
	client := autoscaling.NewFromConfig(localaws.Config(a.URL))
	for _, n := range []int32{0, 4} {
		_, err := client.SetDesiredCapacity(context.Background(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(n)})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" {
			t.Errorf("desired %d: err = %v, want ValidationError", n, err)
		}
	}
	if d := a.Desired("g"); d != 1 {
		t.Errorf("desired = %d, want 1", d)
	}
	if d := a.Desired("missing"); d != -1 {
		t.Errorf("desired of a missing group = %d, want -1", d)
	}
}

func TestAutoScalingCompleteLifecycleWithNoActiveAction(t *testing.T) {
	a := startAutoScaling(t)
	a.PutGroup(localaws.ASGGroup{Name: "g", Max: 2, Desired: 1, LifecycleHooks: []string{"drain"},
		Instances: []localaws.ASGInstance{{ID: "i-1", LifecycleState: "Terminating:Wait", LifecycleToken: "tok-1"}}})
	client := autoscaling.NewFromConfig(localaws.Config(a.URL))
	ctx := context.Background()
	complete := func(instance, token string) error {
		in := &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("drain"),
			LifecycleActionResult: aws.String("CONTINUE")}
		if instance != "" {
			in.InstanceId = aws.String(instance)
		}
		if token != "" {
			in.LifecycleActionToken = aws.String(token)
		}
		_, err := client.CompleteLifecycleAction(ctx, in)
		return err
	}
	if err := complete("i-1", "tok-1"); err != nil {
		t.Fatal(err)
	}
	// As the service answers once the action is done or was never there.
	for _, c := range []struct{ instance, token, message string }{
		{"i-1", "tok-1", "No active Lifecycle Action found with instance ID i-1"},
		{"i-unknown", "", "No active Lifecycle Action found with instance ID i-unknown"},
		{"", "tok-unknown", "No active Lifecycle Action found with token tok-unknown"},
	} {
		err := complete(c.instance, c.token)
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" || ae.ErrorMessage() != c.message {
			t.Errorf("%+v: err = %v, want ValidationError %q", c, err, c.message)
		}
	}
	if got := a.LifecycleCompletions(); len(got) != 1 {
		t.Errorf("completions = %+v, want the first only", got)
	}
}

// DescribeScalingActivities answers in the service's XML shape, newest
// first; a group made to launch without capacity records failed launches,
// and with capacity back launches the missing instances.
func TestAutoScalingActivities(t *testing.T) {
	a := startAutoScaling(t)
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	a.SetClock(func() time.Time { return now })
	a.PutGroup(localaws.ASGGroup{Name: "g", Max: 3})
	a.SetCapacity("g", false)
	c := autoscaling.NewFromConfig(localaws.Config(a.URL))
	if _, err := c.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(5 * time.Minute)
	a.SetCapacity("g", true)

	resp, err := http.PostForm(a.URL, url.Values{"Action": {"DescribeScalingActivities"}, "Version": {"2011-01-01"}, "AutoScalingGroupName": {"g"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var x struct {
		XMLName xml.Name `xml:"DescribeScalingActivitiesResponse"`
		Result  struct {
			Activities []struct{ ActivityId, AutoScalingGroupName, StatusCode, StatusMessage, StartTime, Description string } `xml:"Activities>member"`
		} `xml:"DescribeScalingActivitiesResult"`
		RequestID string `xml:"ResponseMetadata>RequestId"`
	}
	if err := xml.Unmarshal(body, &x); err != nil || x.RequestID == "" {
		t.Fatalf("%v: %s", err, body)
	}
	acts := x.Result.Activities
	if len(acts) != 3 || acts[2].StatusCode != "Failed" || acts[2].StatusMessage != localaws.NoSpotCapacityMessage ||
		acts[0].StatusCode != "Successful" || acts[0].AutoScalingGroupName != "g" || acts[0].StartTime != "2026-11-23T09:05:00.000Z" {
		t.Fatalf("activities = %+v", acts)
	}
	out, err := c.DescribeScalingActivities(t.Context(), &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("g"), MaxRecords: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Activities) != 2 || aws.ToString(out.NextToken) == "" || !aws.ToTime(out.Activities[0].StartTime).Equal(now) {
		t.Fatalf("page = %+v", out)
	}
	if g, _ := a.Group("g"); len(g.Instances) != 2 {
		t.Fatalf("instances after capacity came back: %+v", g.Instances)
	}
}

// UpdateAutoScalingGroup through the real SDK client reorders the mixed
// instances policy's overrides and narrows the subnets, and
// DescribeAutoScalingGroups shows both; a parameter left out stays, and a
// bad request changes nothing.
func TestAutoScalingUpdateGroupOverridesAndSubnets(t *testing.T) {
	a := startAutoScaling(t)
	a.PutGroup(localaws.ASGGroup{Name: "g", Max: 5, InstanceTypes: []string{"g5.xlarge", "g5.2xlarge"}, Subnets: []string{"subnet-a", "subnet-b"}})
	c := autoscaling.NewFromConfig(localaws.Config(a.URL))
	ctx := t.Context()
	describe := func() (types []string, vpc string) {
		t.Helper()
		out, err := c.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"g"}})
		if err != nil || len(out.AutoScalingGroups) != 1 {
			t.Fatalf("describe: %v", err)
		}
		g := out.AutoScalingGroups[0]
		if g.MixedInstancesPolicy == nil || g.MixedInstancesPolicy.LaunchTemplate == nil || g.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification == nil {
			t.Fatalf("no mixed instances policy with a launch template: %+v", g.MixedInstancesPolicy)
		}
		for _, o := range g.MixedInstancesPolicy.LaunchTemplate.Overrides {
			types = append(types, aws.ToString(o.InstanceType))
		}
		return types, aws.ToString(g.VPCZoneIdentifier)
	}
	if ty, vpc := describe(); strings.Join(ty, ",") != "g5.xlarge,g5.2xlarge" || vpc != "subnet-a,subnet-b" {
		t.Fatalf("before: %v %q", ty, vpc)
	}
	_, err := c.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("g"),
		MixedInstancesPolicy: &astypes.MixedInstancesPolicy{LaunchTemplate: &astypes.LaunchTemplate{Overrides: []astypes.LaunchTemplateOverrides{
			{InstanceType: aws.String("g5.2xlarge")}, {InstanceType: aws.String("g5.xlarge")}}}},
		VPCZoneIdentifier: aws.String("subnet-b"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if ty, vpc := describe(); strings.Join(ty, ",") != "g5.2xlarge,g5.xlarge" || vpc != "subnet-b" {
		t.Fatalf("after: %v %q", ty, vpc)
	}
	// Subnets alone: the overrides stay.
	if _, err := c.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String("g"), VPCZoneIdentifier: aws.String("subnet-a,subnet-b")}); err != nil {
		t.Fatal(err)
	}
	if ty, vpc := describe(); strings.Join(ty, ",") != "g5.2xlarge,g5.xlarge" || vpc != "subnet-a,subnet-b" {
		t.Fatalf("after subnets alone: %v %q", ty, vpc)
	}
	// No subnet, a duplicated type, an unknown group: ValidationError, nothing changed.
	for _, in := range []*autoscaling.UpdateAutoScalingGroupInput{
		{AutoScalingGroupName: aws.String("g"), VPCZoneIdentifier: aws.String(" ")},
		{AutoScalingGroupName: aws.String("g"), MixedInstancesPolicy: &astypes.MixedInstancesPolicy{LaunchTemplate: &astypes.LaunchTemplate{Overrides: []astypes.LaunchTemplateOverrides{
			{InstanceType: aws.String("g5.xlarge")}, {InstanceType: aws.String("g5.xlarge")}}}}},
		{AutoScalingGroupName: aws.String("nope"), VPCZoneIdentifier: aws.String("subnet-a")},
	} {
		_, err := c.UpdateAutoScalingGroup(ctx, in)
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" {
			t.Fatalf("err = %v, want ValidationError", err)
		}
	}
	if ty, vpc := describe(); strings.Join(ty, ",") != "g5.2xlarge,g5.xlarge" || vpc != "subnet-a,subnet-b" {
		t.Fatalf("a refused update changed the group: %v %q", ty, vpc)
	}
}
