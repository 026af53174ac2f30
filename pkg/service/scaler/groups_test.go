package scaler_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/local/localaws"
	"github.com/fleetq/fleetq/pkg/service/scaler"
)

// The tick against an Auto Scaling Group through the real SDK client and
// the fake Auto Scaling API: idle workers past the window are drained and
// their instances terminated with decrement; a busy one is never touched.
func TestTickOnAnAutoScalingGroup(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	srv, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	srv.PutGroup(localaws.ASGGroup{Name: "fleetq-test-gpu", Min: 0, Max: 5, Desired: 3})
	for _, id := range []string{"i-a", "i-b", "i-c"} {
		srv.AddInstance("fleetq-test-gpu", localaws.ASGInstance{ID: id, LifecycleState: "InService", ProtectedFromScaleIn: true})
		a := worker.Auth{WorkerID: "w-" + id, Fleet: "gpu", TokenHash: "h-" + id}
		if _, err := h.sys.Store.RegisterWorker(h.ctx, worker.Registration{WorkerID: a.WorkerID, Fleet: "gpu", Stage: "test", InstanceID: id, MaxConcurrency: 2, TokenHash: a.TokenHash}); err != nil {
			t.Fatal(err)
		}
		h.workers[id] = a
	}
	h.submit(1, "j")
	leases := h.leaseAll()
	ad := asg.New(autoscaling.NewFromConfig(localaws.Config(srv.URL), asg.WithoutSDKRetries), asg.Options{Sleep: func(context.Context, time.Duration) error { return nil }})
	h.configure(func(c *scaler.Config) {
		c.Capacity = scaler.Groups{Adapter: ad, Names: map[string]string{"gpu": "fleetq-test-gpu"}}
	})
	srv.Throttle("DescribeAutoScalingGroups", 2) // retried by the adapter
	for range 20 {
		h.clock.Advance(time.Minute)
		h.heartbeat(leases)
		if _, err := h.sc.Tick(h.ctx); err != nil {
			t.Fatal(err)
		}
	}
	g, ok := srv.Group("fleetq-test-gpu")
	if !ok || g.Desired != 1 || len(g.Instances) != 1 {
		t.Fatalf("group after scale-in: %+v", g)
	}
	var busy string
	for l := range leases {
		busy = leases[l].a.WorkerID
	}
	if "w-"+g.Instances[0].ID != busy {
		t.Fatalf("kept %s, but the busy worker is %s", g.Instances[0].ID, busy)
	}
	if n := srv.CallCount("TerminateInstanceInAutoScalingGroup"); n != 2 {
		t.Fatalf("%d terminations, want 2", n)
	}
}
