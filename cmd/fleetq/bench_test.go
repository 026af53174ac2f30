package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// bench boot against the embedded EC2 on a fake clock: each phase takes
// what the EC2 takes, a start without capacity is counted and the run goes
// on, and every instance is ended with its Spot request.
func TestBenchBootTimesThePhases(t *testing.T) {
	a, err := localaws.StartAccount("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	clk := clock.NewFake(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	a.SetClock(clk.Now)
	a.SetEC2Timing(localaws.EC2Timing{Pending: 20 * time.Second, Stopping: 12 * time.Second, ShuttingDown: 5 * time.Second})
	a.PutLaunchTemplate(localaws.LaunchTemplate{ID: "lt-0123456789abcdef0", ImageID: "ami-0123456789abcdef0"})
	a.SetStartFailures("g6.xlarge", "us-east-1b", 1, 1)
	api := ec2.NewFromConfig(localaws.Config(a.URL))

	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	driving, stopDriving := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- runBenchBoot(ctx, []string{"--stage", "dev", "--fleet", "demo", "--runs", "3", "--launch-template", "lt-0123456789abcdef0",
			"--pair", "g5.xlarge/us-east-1a", "--pair", "g6.xlarge/us-east-1b", "--volume-gb", "40", "--interval", "1s"}, &stdout, &stderr, api, clk)
		stopDriving()
	}()
	// The bench waits on the clock between two looks: move it on each
	// time, until the bench is done.
	for clk.BlockUntil(driving, 1) == nil {
		clk.Advance(time.Second)
	}
	code := <-done
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := []string{
		"run 1 g5.xlarge/us-east-1a: create 20.0s, stop 12.0s, start 20.0s",
		"run 2 g6.xlarge/us-east-1b: create 20.0s, stop 12.0s, no Spot capacity",
		"run 3 g5.xlarge/us-east-1a: create 20.0s, stop 12.0s, start 20.0s",
		"create n=3  min 20.0s  median 20.0s  max 20.0s",
		"stop   n=3  min 12.0s  median 12.0s  max 12.0s",
		"start  n=2  min 20.0s  median 20.0s  max 20.0s",
		"1 of 3 runs met no Spot capacity",
	}
	if got := strings.Split(strings.TrimSpace(stdout.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("printed\n%s\nwant\n%s", stdout.String(), strings.Join(want, "\n"))
	}
	all := a.Instances()
	if len(all) != 3 {
		t.Fatalf("%d instances launched, want 3 (no replacement by a Spot request)", len(all))
	}
	for _, in := range all {
		req, _ := a.SpotRequest(in.SpotRequestID)
		if in.State != localaws.EC2ShuttingDown && in.State != localaws.EC2Terminated || req.State != "cancelled" || in.VolumeGB != 40 || in.Tags["fleetq:fleet"] != "bench-demo" {
			t.Errorf("left %+v with request %+v", in, req)
		}
	}
	if code := runBenchBoot(ctx, []string{"--fleet", "demo", "--launch-template", "lt-0123456789abcdef0"}, &stdout, &stderr, api, clk); code != 2 ||
		!strings.Contains(stderr.String(), "fleet demo has no spot_pool pairs: pass --pair type/zone") {
		t.Fatalf("without pairs: exit %d, %s", code, stderr.String())
	}
}
