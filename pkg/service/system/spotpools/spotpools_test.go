package spotpools_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/system/spotpools"
)

// In AWS the scaler runs a fleet's pool through its ec2pool adapter: the
// embedded EC2 and Auto Scaling through the SDK's clients here. A pool
// instance launches from the fleet's Spot group's launch template, in the
// stage's subnet of its zone. A start without Spot capacity is the
// scaler's ErrNoSpotCapacity, one on an instance EC2 stopped on an
// interruption its ErrPoolInterrupted, and the pool's listing says which
// instance EC2 holds stopped.
func TestPoolGroupsRunAFleetsSpotPoolThroughEC2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	clk := clock.NewFake(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	a.SetClock(clk.Now)
	// The fake Auto Scaling API names this launch template for a group
	// with a mixed instances policy.
	const template = "lt-00000000000000000"
	a.PutLaunchTemplate(localaws.LaunchTemplate{ID: template, ImageID: "ami-0123456789abcdef0", InstanceType: "g5.xlarge"})
	as, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = as.Close() })
	as.PutGroup(localaws.ASGGroup{Name: "fleetq-test-gpu", Max: 4, InstanceTypes: []string{"g5.xlarge"}})
	cfg, err := fleetconfig.Parse("test.yaml", []byte(`
stage: test
fleets:
  - slug: gpu
    workflows: [render]
    instance_types: [g5.xlarge]
    max_instances: 4
    spot_pool:
      size: 3
      pairs:
        - {instance_type: g5.xlarge, zone: us-east-1a}
        - {instance_type: g5.xlarge, zone: us-east-1b}
        - {instance_type: g5.xlarge, zone: us-east-1c}
  - slug: other
    workflows: [other]
    instance_types: [g5.xlarge]
`))
	if err != nil {
		t.Fatal(err)
	}
	groups := scaler.Groups{Adapter: asg.New(autoscaling.NewFromConfig(localaws.Config(as.URL)), asg.Options{}),
		Names:   map[string]string{"gpu": "fleetq-test-gpu", "other": "fleetq-test-other"},
		Subnets: []scaler.Subnet{{ID: "subnet-0a", Zone: "us-east-1a"}, {ID: "subnet-0b", Zone: "us-east-1b"}, {ID: "subnet-0c", Zone: "us-east-1c"}}}
	g := spotpools.NewPoolGroups(groups, ec2.NewFromConfig(localaws.Config(a.URL)), cfg)
	if !g.HasSpotPool("gpu") || g.HasSpotPool("other") {
		t.Fatal("HasSpotPool: want gpu only")
	}
	var _ scaler.Capacity = g // still the fleets' groups
	pairA, pairB := scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"}, scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1b"}
	short, err := g.CreatePoolInstance(ctx, "gpu", pairA, 60)
	if err != nil {
		t.Fatal(err)
	}
	other, err := g.CreatePoolInstance(ctx, "gpu", pairB, 60)
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := a.Instance(other); in.LaunchTemplateID != template || in.Tags["fleetq:fleet"] != "gpu" || in.Tags["fleetq:stage"] != "test" {
		t.Fatalf("launched %+v: want the Spot group's template, tagged with the stage and fleet", in)
	}
	clk.Advance(time.Minute)
	for _, id := range []string{short, other} {
		if err := g.StopPoolInstance(ctx, "gpu", id); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	a.SetStartFailures("g5.xlarge", "us-east-1a", 1, 7)
	if err := g.StartPoolInstance(ctx, "gpu", short); !errors.Is(err, scaler.ErrNoSpotCapacity) {
		t.Fatalf("start without capacity: %v, want ErrNoSpotCapacity", err)
	}
	if err := g.StartPoolInstance(ctx, "gpu", other); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if !a.Interrupt(other) {
		t.Fatalf("%s not interrupted", other)
	}
	if err := g.StartPoolInstance(ctx, "gpu", other); !errors.Is(err, scaler.ErrPoolInterrupted) {
		t.Fatalf("start of an interrupted instance: %v, want ErrPoolInterrupted", err)
	}
	ms, err := g.DescribePool(ctx, "gpu")
	if err != nil || len(ms) != 2 {
		t.Fatalf("DescribePool = %+v, %v", ms, err)
	}
	for _, m := range ms {
		if m.State != "stopped" && m.State != "stopping" || m.Interrupted != (m.ID == other) || (m.ID == short) != (m.Pair == pairA) {
			t.Fatalf("pool %+v: want both stopped, %s held by EC2", ms, other)
		}
	}
	if err := g.TerminatePoolInstance(ctx, "gpu", short); err != nil {
		t.Fatal(err)
	}
	if _, err := g.DescribePool(ctx, "other"); err == nil {
		t.Fatal("a fleet without a pool adapter: want an error")
	}
}
