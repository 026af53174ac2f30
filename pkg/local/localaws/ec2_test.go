package localaws_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

var ec2Epoch = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// startEC2 starts an Account on a fake clock with the fleet's launch
// template, and a client that does not retry (an error is seen as EC2
// answers it).
func startEC2(t *testing.T) (*localaws.Account, *ec2.Client, *clock.Fake) {
	t.Helper()
	a := startAccount(t)
	clk := clock.NewFake(ec2Epoch)
	a.SetClock(clk.Now)
	a.PutLaunchTemplate(localaws.LaunchTemplate{ID: "lt-0123456789abcdef0", Name: "fleetq-test-video", ImageID: "ami-0123456789abcdef0", InstanceType: "g5.xlarge"})
	c := ec2.NewFromConfig(localaws.Config(a.URL), func(o *ec2.Options) { o.Retryer = aws.NopRetryer{} })
	return a, c, clk
}

func spotRun(instanceType, zone string, spotType ec2types.SpotInstanceType, behavior ec2types.InstanceInterruptionBehavior) *ec2.RunInstancesInput {
	return &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: aws.String("lt-0123456789abcdef0"), Version: aws.String("$Latest")},
		InstanceType:   ec2types.InstanceType(instanceType),
		Placement:      &ec2types.Placement{AvailabilityZone: aws.String(zone)},
		InstanceMarketOptions: &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeSpot,
			SpotOptions: &ec2types.SpotMarketOptions{SpotInstanceType: spotType, InstanceInterruptionBehavior: behavior}},
		BlockDeviceMappings: []ec2types.BlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"),
			Ebs: &ec2types.EbsBlockDevice{VolumeSize: aws.Int32(60), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true)}}},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String("fleetq:stage"), Value: aws.String("test")}, {Key: aws.String("fleetq:fleet"), Value: aws.String("video")},
			{Key: aws.String("fleetq:pool"), Value: aws.String("spot")}}}},
	}
}

func launchPooled(t *testing.T, c *ec2.Client, instanceType, zone string) ec2types.Instance {
	t.Helper()
	out, err := c.RunInstances(context.Background(), spotRun(instanceType, zone, ec2types.SpotInstanceTypePersistent, ec2types.InstanceInterruptionBehaviorStop))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 1 {
		t.Fatalf("launched %d instances", len(out.Instances))
	}
	return out.Instances[0]
}

func describe(t *testing.T, c *ec2.Client, id string) ec2types.Instance {
	t.Helper()
	out, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("describe %s: %+v", id, out.Reservations)
	}
	return out.Reservations[0].Instances[0]
}

func stateOf(t *testing.T, c *ec2.Client, id string) ec2types.InstanceStateName {
	t.Helper()
	return describe(t, c, id).State.Name
}

func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

func TestEC2PersistentSpotStopsAndStartsThroughTheSDK(t *testing.T) {
	a, c, clk := startEC2(t)
	ctx := context.Background()
	in := launchPooled(t, c, "g6.xlarge", "us-east-1b")
	id := aws.ToString(in.InstanceId)
	if in.State.Name != ec2types.InstanceStateNamePending || in.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot ||
		aws.ToString(in.SpotInstanceRequestId) == "" || in.InstanceType != "g6.xlarge" || aws.ToString(in.Placement.AvailabilityZone) != "us-east-1b" ||
		aws.ToString(in.ImageId) != "ami-0123456789abcdef0" || !aws.ToTime(in.LaunchTime).Equal(ec2Epoch) {
		t.Fatalf("launched %+v", in)
	}
	held, _ := a.Instance(id)
	if held.VolumeGB != 60 || held.LaunchTemplateID != "lt-0123456789abcdef0" || held.LaunchTemplateVersion != "$Latest" || held.Tags["fleetq:pool"] != "spot" {
		t.Fatalf("held %+v", held)
	}
	clk.Advance(localaws.DefaultEC2Timing.Pending - time.Second)
	if s := stateOf(t, c, id); s != ec2types.InstanceStateNamePending {
		t.Fatalf("a second before the end of pending: %s", s)
	}
	clk.Advance(time.Second)
	// Found by the pool's tags and state, as the adapter lists them.
	out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:fleetq:fleet"), Values: []string{"video"}},
		{Name: aws.String("instance-state-name"), Values: []string{"running", "stopped"}}}})
	if err != nil || len(out.Reservations) != 1 || aws.ToString(out.Reservations[0].Instances[0].InstanceId) != id {
		t.Fatalf("by tag and state: %+v, %v", out, err)
	}
	if out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:fleetq:fleet"), Values: []string{"other"}}}}); err != nil || len(out.Reservations) != 0 {
		t.Fatalf("another fleet's: %+v, %v", out, err)
	}
	// 30 s of running bills the one-minute minimum.
	clk.Advance(30 * time.Second)
	stop, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if ch := stop.StoppingInstances[0]; ch.CurrentState.Name != ec2types.InstanceStateNameStopping || ch.PreviousState.Name != ec2types.InstanceStateNameRunning {
		t.Fatalf("stop answered %+v -> %+v", ch.PreviousState, ch.CurrentState)
	}
	clk.Advance(localaws.DefaultEC2Timing.Stopping)
	d := describe(t, c, id)
	if d.State.Name != ec2types.InstanceStateNameStopped || d.StateReason == nil || aws.ToString(d.StateReason.Code) != localaws.ReasonUserShutdown {
		t.Fatalf("after stopping: %s, %+v", d.State.Name, d.StateReason)
	}
	if h, _ := a.Instance(id); h.Billed != time.Minute || h.Runs != 1 {
		t.Fatalf("billed %s over %d runs after a 30 s run, want 1m over 1", h.Billed, h.Runs)
	}
	// Stopped for an hour: nothing billed. Then a 90 s run.
	clk.Advance(time.Hour)
	start, err := c.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if ch := start.StartingInstances[0]; ch.CurrentState.Name != ec2types.InstanceStateNamePending || ch.PreviousState.Name != ec2types.InstanceStateNameStopped {
		t.Fatalf("start answered %+v -> %+v", ch.PreviousState, ch.CurrentState)
	}
	clk.Advance(localaws.DefaultEC2Timing.Pending)
	if d := describe(t, c, id); d.State.Name != ec2types.InstanceStateNameRunning || d.StateReason != nil {
		t.Fatalf("started: %s, %+v", d.State.Name, d.StateReason)
	}
	clk.Advance(90 * time.Second)
	if h, _ := a.Instance(id); h.Billed != time.Minute+90*time.Second || h.Runs != 2 {
		t.Fatalf("billed %s over %d runs, want 2m30s over 2", h.Billed, h.Runs)
	}
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if h, _ := a.Instance(id); h.Billed != time.Minute+90*time.Second || h.State != localaws.EC2Stopped {
		t.Fatalf("billed %s (%s) after the stop, want 2m30s", h.Billed, h.State)
	}
	// Starting a running instance, or stopping a stopped one, changes nothing.
	if out, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil || out.StoppingInstances[0].CurrentState.Name != ec2types.InstanceStateNameStopped {
		t.Fatalf("stop of a stopped instance: %+v, %v", out, err)
	}
	if _, err := c.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{"i-00000000000000999"}}); errorCode(err) != "InvalidInstanceID.NotFound" {
		t.Fatalf("start of an unknown instance: %v", err)
	}
}

// RunInstances takes a persistent Spot request only with the stop (or
// hibernate) behaviour, and stop only with a persistent request; only the
// instance of a persistent request can be stopped.
func TestEC2RefusesWhatEC2RefusesOfSpotRequests(t *testing.T) {
	a, c, clk := startEC2(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		in   *ec2.RunInstancesInput
		code string
	}{
		{"one-time with stop", spotRun("g5.xlarge", "us-east-1a", ec2types.SpotInstanceTypeOneTime, ec2types.InstanceInterruptionBehaviorStop), "InvalidParameterCombination"},
		{"stop, type left out", spotRun("g5.xlarge", "us-east-1a", "", ec2types.InstanceInterruptionBehaviorStop), "InvalidParameterCombination"},
		{"persistent with terminate", spotRun("g5.xlarge", "us-east-1a", ec2types.SpotInstanceTypePersistent, ec2types.InstanceInterruptionBehaviorTerminate), "InvalidParameterCombination"},
		{"persistent, behaviour left out", spotRun("g5.xlarge", "us-east-1a", ec2types.SpotInstanceTypePersistent, ""), "InvalidParameterCombination"},
		{"no zone of that name", spotRun("g5.xlarge", "us-east-1", ec2types.SpotInstanceTypePersistent, ec2types.InstanceInterruptionBehaviorStop), "InvalidParameterValue"},
		{"unknown template", func() *ec2.RunInstancesInput {
			in := spotRun("g5.xlarge", "us-east-1a", ec2types.SpotInstanceTypePersistent, ec2types.InstanceInterruptionBehaviorStop)
			in.LaunchTemplate.LaunchTemplateId = aws.String("lt-0000000000000dead")
			return in
		}(), "InvalidLaunchTemplateId.NotFound"},
	} {
		if _, err := c.RunInstances(ctx, tc.in); errorCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if n := len(a.Instances()); n != 0 {
		t.Fatalf("refused requests launched %d instances", n)
	}
	out, err := c.RunInstances(ctx, spotRun("g5.xlarge", "us-east-1a", ec2types.SpotInstanceTypeOneTime, ec2types.InstanceInterruptionBehaviorTerminate))
	if err != nil {
		t.Fatal(err)
	}
	oneTime := aws.ToString(out.Instances[0].InstanceId)
	clk.Advance(localaws.DefaultEC2Timing.Pending)
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{oneTime}}); errorCode(err) != "UnsupportedOperation" {
		t.Fatalf("stop of a one-time Spot instance: %v", err)
	}
	pooled := aws.ToString(launchPooled(t, c, "g5.xlarge", "us-east-1a").InstanceId)
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{pooled}}); errorCode(err) != "IncorrectInstanceState" {
		t.Fatalf("stop of a pending instance: %v", err)
	}
	if s := stateOf(t, c, oneTime); s != ec2types.InstanceStateNameRunning {
		t.Fatalf("the refused stop left the instance %s", s)
	}
}

// startStop starts a stopped instance and, if it started, lets it run and
// stops it again; it reports whether the start was refused for capacity.
func startStop(t *testing.T, c *ec2.Client, clk *clock.Fake, id string) bool {
	t.Helper()
	ctx := context.Background()
	_, err := c.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}})
	if errorCode(err) == "InsufficientInstanceCapacity" {
		if s := stateOf(t, c, id); s != ec2types.InstanceStateNameStopped {
			t.Fatalf("a start refused for capacity left the instance %s", s)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(localaws.DefaultEC2Timing.Pending)
	if _, err := c.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(localaws.DefaultEC2Timing.Stopping)
	return false
}

func stoppedPooled(t *testing.T, c *ec2.Client, clk *clock.Fake, instanceType, zone string) string {
	t.Helper()
	id := aws.ToString(launchPooled(t, c, instanceType, zone).InstanceId)
	clk.Advance(localaws.DefaultEC2Timing.Pending)
	if _, err := c.StopInstances(context.Background(), &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(localaws.DefaultEC2Timing.Stopping)
	return id
}

// A pair's starts fail for capacity at the rate set, the same ones on
// every run with the same seed; other pairs' starts do not fail, and a
// failed start bills nothing.
func TestEC2StartFailsForCapacityAtThePairsRate(t *testing.T) {
	pattern := func(seed uint64) ([]bool, int) {
		a, c, clk := startEC2(t)
		a.SetStartFailures("g5.xlarge", "us-east-1a", 0.3, seed)
		failing := stoppedPooled(t, c, clk, "g5.xlarge", "us-east-1a")
		other := stoppedPooled(t, c, clk, "g5.xlarge", "us-east-1b")
		var fails []bool
		for range 100 {
			fails = append(fails, startStop(t, c, clk, failing))
			if startStop(t, c, clk, other) {
				t.Fatal("a start on a pair without a failure rate failed")
			}
		}
		h, _ := a.Instance(failing)
		started := 0
		for _, f := range fails {
			if !f {
				started++
			}
		}
		if h.Runs != 1+started || h.Billed != time.Duration(1+started)*time.Minute {
			t.Fatalf("%d starts: %d runs billed %s", started, h.Runs, h.Billed)
		}
		return fails, 100 - started
	}
	first, n := pattern(7)
	if n < 15 || n > 45 {
		t.Fatalf("%d of 100 starts failed at a rate of 0.3", n)
	}
	if again, _ := pattern(7); !slices.Equal(first, again) {
		t.Fatal("the same seed failed other starts")
	}
	if other, _ := pattern(8); slices.Equal(first, other) {
		t.Fatal("another seed failed the same starts")
	}
	a, c, clk := startEC2(t)
	a.SetStartFailures("g6.xlarge", "us-east-1a", 1, 1)
	id := stoppedPooled(t, c, clk, "g6.xlarge", "us-east-1a")
	_, err := c.StartInstances(context.Background(), &ec2.StartInstancesInput{InstanceIds: []string{id}})
	var re interface{ HTTPStatusCode() int }
	if errorCode(err) != "InsufficientInstanceCapacity" || !errors.As(err, &re) || re.HTTPStatusCode() != 500 {
		t.Fatalf("start without capacity: %v", err)
	}
}

// An instance EC2 stopped on an interruption is not started by
// StartInstances: only EC2 starts it, when capacity is back.
func TestEC2InterruptedInstanceIsStartedOnlyByEC2(t *testing.T) {
	a, c, clk := startEC2(t)
	ctx := context.Background()
	id := aws.ToString(launchPooled(t, c, "g5.xlarge", "us-east-1a").InstanceId)
	if a.Interrupt(id) {
		t.Fatal("a pending instance was interrupted")
	}
	clk.Advance(localaws.DefaultEC2Timing.Pending + 5*time.Minute)
	if !a.Interrupt(id) {
		t.Fatal("the running instance was not interrupted")
	}
	if s := stateOf(t, c, id); s != ec2types.InstanceStateNameStopping {
		t.Fatalf("interrupted: %s", s)
	}
	clk.Advance(localaws.DefaultEC2Timing.Stopping)
	d := describe(t, c, id)
	if d.State.Name != ec2types.InstanceStateNameStopped || aws.ToString(d.StateReason.Code) != localaws.ReasonSpotShutdown {
		t.Fatalf("after the interruption: %s, %+v", d.State.Name, d.StateReason)
	}
	reqs, err := c.DescribeSpotInstanceRequests(ctx, &ec2.DescribeSpotInstanceRequestsInput{SpotInstanceRequestIds: []string{aws.ToString(d.SpotInstanceRequestId)}})
	if err != nil {
		t.Fatal(err)
	}
	if r := reqs.SpotInstanceRequests[0]; r.State != ec2types.SpotInstanceStateDisabled || aws.ToString(r.Status.Code) != "instance-stopped-no-capacity" ||
		r.Type != ec2types.SpotInstanceTypePersistent || r.InstanceInterruptionBehavior != ec2types.InstanceInterruptionBehaviorStop || aws.ToString(r.InstanceId) != id {
		t.Fatalf("request %+v", r)
	}
	if _, err := c.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}}); errorCode(err) != "IncorrectSpotRequestState" {
		t.Fatalf("start of an instance EC2 stopped: %v", err)
	}
	if h, _ := a.Instance(id); h.State != localaws.EC2Stopped || !h.StoppedByEC2 || h.Billed != 5*time.Minute {
		t.Fatalf("after the refused start: %+v", h)
	}
	if !a.ResumeInterrupted(id) {
		t.Fatal("EC2 did not start the instance it stopped")
	}
	clk.Advance(localaws.DefaultEC2Timing.Pending)
	if s := stateOf(t, c, id); s != ec2types.InstanceStateNameRunning {
		t.Fatalf("resumed: %s", s)
	}
	if r, _ := a.SpotRequest(aws.ToString(d.SpotInstanceRequestId)); r.State != "active" {
		t.Fatalf("request after the resume: %+v", r)
	}
	if a.ResumeInterrupted(id) {
		t.Fatal("a running instance was resumed")
	}
}

// Ending a pooled instance takes two calls: terminating it alone lets its
// persistent request launch a replacement; cancelling the request first
// does not.
func TestEC2EndingAPersistentSpotInstance(t *testing.T) {
	a, c, clk := startEC2(t)
	ctx := context.Background()
	first := launchPooled(t, c, "g5.xlarge", "us-east-1a")
	id, req := aws.ToString(first.InstanceId), aws.ToString(first.SpotInstanceRequestId)
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	r, _ := a.SpotRequest(req)
	if r.InstanceID == id || r.State != "active" {
		t.Fatalf("terminated without a cancel, the request is %+v", r)
	}
	next, _ := a.Instance(r.InstanceID)
	if next.InstanceType != "g5.xlarge" || next.Zone != "us-east-1a" || next.Tags["fleetq:fleet"] != "video" || next.SpotRequestID != req {
		t.Fatalf("replacement %+v", next)
	}
	cancel, err := c.CancelSpotInstanceRequests(ctx, &ec2.CancelSpotInstanceRequestsInput{SpotInstanceRequestIds: []string{req}})
	if err != nil || cancel.CancelledSpotInstanceRequests[0].State != ec2types.CancelSpotInstanceRequestStateCancelled {
		t.Fatalf("cancel: %+v, %v", cancel, err)
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{next.ID}}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(localaws.DefaultEC2Timing.ShuttingDown)
	for _, in := range a.Instances() {
		if in.State != localaws.EC2Terminated {
			t.Errorf("%s is %s", in.ID, in.State)
		}
	}
	if n := len(a.Instances()); n != 2 {
		t.Fatalf("%d instances, want the first and its one replacement", n)
	}
	if _, err := c.CancelSpotInstanceRequests(ctx, &ec2.CancelSpotInstanceRequestsInput{SpotInstanceRequestIds: []string{"sir-00000bad"}}); errorCode(err) != "InvalidSpotInstanceRequestID.NotFound" {
		t.Fatalf("cancel of an unknown request: %v", err)
	}
}
