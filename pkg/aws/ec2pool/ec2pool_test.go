package ec2pool_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/aws/ec2pool"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

const template = "lt-0123456789abcdef0"

type env struct {
	ec2   *localaws.Account
	clk   *clock.Fake
	pool  ec2pool.Pool
	calls *atomic.Int64 // requests the pool's client sent, retries included
}

// newEnv is a fleet's pool over the embedded EC2, through a real SDK
// client with its default retryer.
func newEnv(t *testing.T) env {
	t.Helper()
	a, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	clk := clock.NewFake(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	a.SetClock(clk.Now)
	a.PutLaunchTemplate(localaws.LaunchTemplate{ID: template, ImageID: "ami-0123456789abcdef0", InstanceType: "g5.xlarge"})
	calls := &atomic.Int64{}
	c := ec2.NewFromConfig(localaws.Config(a.URL), func(o *ec2.Options) { o.APIOptions = append(o.APIOptions, awsenv.CountRequests(calls)) })
	return env{ec2: a, clk: clk, calls: calls, pool: ec2pool.Pool{EC2: c, Stage: "test", Fleet: "video", LaunchTemplateID: template,
		Subnets: map[string]string{"us-east-1a": "subnet-0a", "us-east-1b": "subnet-0b"}}}
}

func (e env) settle() { e.clk.Advance(time.Minute) }

// created is a pool instance launched and stopped into the pool.
func (e env) created(t *testing.T, pair scaling.Pair) ec2pool.Instance {
	t.Helper()
	in, err := e.pool.Create(context.Background(), pair, 60, "")
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	if err := e.pool.Stop(context.Background(), in.ID); err != nil {
		t.Fatal(err)
	}
	e.settle()
	return in
}

func TestCreateLaunchesAPersistentSpotInstanceThatStops(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pair := scaling.Pair{InstanceType: "g6.xlarge", Zone: "us-east-1b"}
	in, err := e.pool.Create(ctx, pair, 75, "")
	if err != nil {
		t.Fatal(err)
	}
	if in.ID == "" || in.Pair != pair || in.State != "pending" || in.SpotRequestID == "" {
		t.Fatalf("created %+v", in)
	}
	held, _ := e.ec2.Instance(in.ID)
	if held.LaunchTemplateID != template || held.LaunchTemplateVersion != "$Latest" || held.VolumeGB != 75 ||
		held.Tags["fleetq:stage"] != "test" || held.Tags["fleetq:fleet"] != "video" || held.Tags["fleetq:pool"] != "spot" {
		t.Fatalf("launched %+v", held)
	}
	req, _ := e.ec2.SpotRequest(in.SpotRequestID)
	if req.Type != "persistent" || req.InterruptionBehavior != "stop" {
		t.Fatalf("Spot request %+v", req)
	}
	if _, err := e.pool.Create(ctx, scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1c"}, 60, ""); err == nil {
		t.Fatal("a launch in a zone without the fleet's subnet")
	}
	// The same token is the same launch.
	a, err := e.pool.Create(ctx, pair, 60, "pool-video-7")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := e.pool.Create(ctx, pair, 60, "pool-video-7"); err != nil || b.ID != a.ID {
		t.Fatalf("repeated launch: %+v, %v; first %s", b, err, a.ID)
	}
	if n := len(e.ec2.Instances()); n != 2 {
		t.Fatalf("%d instances launched, want 2", n)
	}
}

// Describe lists the fleet's pool instances that are not ended, and
// nothing else.
func TestDescribeListsTheFleetsPoolOnly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	stopped := e.created(t, scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"})
	running, err := e.pool.Create(ctx, scaling.Pair{InstanceType: "g6.xlarge", Zone: "us-east-1a"}, 60, "")
	if err != nil {
		t.Fatal(err)
	}
	ended := e.created(t, scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1b"})
	if err := e.pool.End(ctx, ended.ID); err != nil {
		t.Fatal(err)
	}
	other := e.pool
	other.Fleet = "image"
	if _, err := other.Create(ctx, scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"}, 60, ""); err != nil {
		t.Fatal(err)
	}
	e.settle()
	got, err := e.pool.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != stopped.ID || got[0].State != "stopped" || got[1].ID != running.ID || got[1].State != "running" ||
		got[1].Pair != (scaling.Pair{InstanceType: "g6.xlarge", Zone: "us-east-1a"}) || got[0].Interrupted() {
		t.Fatalf("described %+v", got)
	}
}

// A start without Spot capacity fails at once, as ErrNoCapacity, with
// one request (the SDK would retry the 500 EC2 answers), and leaves the
// instance stopped.
func TestStartWithoutCapacityIsErrNoCapacityAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pair := scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"}
	in := e.created(t, pair)
	e.ec2.SetStartFailures(pair.InstanceType, pair.Zone, 1, 1)
	before := e.calls.Load()
	err := e.pool.Start(ctx, in.ID)
	if !errors.Is(err, ec2pool.ErrNoCapacity) || errors.Is(err, ec2pool.ErrInterrupted) {
		t.Fatalf("start without capacity: %v", err)
	}
	if n := e.calls.Load() - before; n != 1 {
		t.Fatalf("the start sent %d requests, want 1", n)
	}
	if h, _ := e.ec2.Instance(in.ID); h.State != localaws.EC2Stopped {
		t.Fatalf("after the failed start: %s", h.State)
	}
	e.ec2.SetStartFailures(pair.InstanceType, pair.Zone, 0, 1)
	if err := e.pool.Start(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if h, _ := e.ec2.Instance(in.ID); h.State != localaws.EC2Running || h.Runs != 2 {
		t.Fatalf("started: %+v", h)
	}
	if err := e.pool.Start(ctx, "i-00000000000000999"); err == nil || errors.Is(err, ec2pool.ErrNoCapacity) {
		t.Fatalf("start of an unknown instance: %v", err)
	}
}

// An instance EC2 stopped on an interruption is described as interrupted
// and its start refused as ErrInterrupted, until EC2 starts it.
func TestInterruptedInstanceIsNotStarted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in, err := e.pool.Create(ctx, scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"}, 60, "")
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	if !e.ec2.Interrupt(in.ID) {
		t.Fatal("not interrupted")
	}
	e.settle()
	got, err := e.pool.Describe(ctx)
	if err != nil || len(got) != 1 || !got[0].Interrupted() || got[0].State != "stopped" {
		t.Fatalf("described %+v, %v", got, err)
	}
	if err := e.pool.Start(ctx, in.ID); !errors.Is(err, ec2pool.ErrInterrupted) || errors.Is(err, ec2pool.ErrNoCapacity) {
		t.Fatalf("start of an interrupted instance: %v", err)
	}
	e.ec2.ResumeInterrupted(in.ID)
	e.settle()
	if got, _ := e.pool.Describe(ctx); len(got) != 1 || got[0].Interrupted() || got[0].State != "running" {
		t.Fatalf("after EC2 started it: %+v", got)
	}
}

// End cancels the Spot request, then terminates: no replacement is
// launched, and ending an ended instance is done.
func TestEndCancelsThenTerminates(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in := e.created(t, scaling.Pair{InstanceType: "g5.xlarge", Zone: "us-east-1a"})
	if err := e.pool.End(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if req, _ := e.ec2.SpotRequest(in.SpotRequestID); req.State != "cancelled" || req.InstanceID != in.ID {
		t.Fatalf("request %+v", req)
	}
	all := e.ec2.Instances()
	if len(all) != 1 || all[0].State != localaws.EC2Terminated {
		t.Fatalf("instances %+v: want the one, terminated, and no replacement", all)
	}
	if err := e.pool.End(ctx, in.ID); err != nil {
		t.Fatalf("ending it again: %v", err)
	}
	if err := e.pool.End(ctx, "i-00000000000000999"); err != nil {
		t.Fatalf("ending an instance EC2 does not know: %v", err)
	}
	if got, _ := e.pool.Describe(ctx); len(got) != 0 {
		t.Fatalf("described %+v", got)
	}
}
