package scalerfn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fleetq/fleetq/pkg/aws/ec2pool"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/service/scaler"
	"github.com/fleetq/fleetq/pkg/service/system/scalerfn"
)

// In AWS the scaler runs a fleet's pool through its ec2pool adapter: the
// embedded EC2 through the SDK's client here. A start without Spot
// capacity is the scaler's ErrNoSpotCapacity, one on an instance EC2
// stopped on an interruption its ErrPoolInterrupted, and the pool's
// listing says which instance EC2 holds stopped.
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
	a.PutLaunchTemplate(localaws.LaunchTemplate{ID: "lt-0123456789abcdef0", ImageID: "ami-0123456789abcdef0", InstanceType: "g5.xlarge"})
	g := scalerfn.PoolGroups{Pools: map[string]ec2pool.Pool{"gpu": {EC2: ec2.NewFromConfig(localaws.Config(a.URL)), Stage: "test", Fleet: "gpu",
		LaunchTemplateID: "lt-0123456789abcdef0"}}}
	if !g.HasSpotPool("gpu") || g.HasSpotPool("other") {
		t.Fatal("HasSpotPool: want gpu only")
	}
	pairA, pairB := scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"}, scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1b"}
	short, err := g.CreatePoolInstance(ctx, "gpu", pairA, 60)
	if err != nil {
		t.Fatal(err)
	}
	other, err := g.CreatePoolInstance(ctx, "gpu", pairB, 60)
	if err != nil {
		t.Fatal(err)
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
