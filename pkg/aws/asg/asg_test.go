package asg_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"

	"github.com/fleetq/fleetq/pkg/aws/asg"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
	"github.com/fleetq/fleetq/pkg/local/faultproxy"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// sleeps records the adapter's waits instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return ctx.Err()
}

func (s *sleeps) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// harness is a fake Auto Scaling server, a real SDK client on it with the
// SDK's retries off, and an adapter whose waits are recorded.
type harness struct {
	fake   *localaws.AutoScaling
	ad     *asg.Adapter
	sleeps *sleeps
}

func newHarness(t *testing.T, opts asg.Options) *harness {
	t.Helper()
	fake, err := localaws.StartAutoScaling("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	s := &sleeps{}
	if opts.Sleep == nil {
		opts.Sleep = s.Sleep
	}
	client := autoscaling.NewFromConfig(localaws.Config(fake.URL), asg.WithoutSDKRetries)
	return &harness{fake: fake, ad: asg.New(client, opts), sleeps: s}
}

func gpuGroup() localaws.ASGGroup {
	return localaws.ASGGroup{
		Name: "fleetq-dev-gpu", Min: 0, Max: 10, Desired: 8,
		LifecycleHooks: []string{"launch", "drain"},
		Instances: []localaws.ASGInstance{
			{ID: "i-a", LifecycleState: "InService", InstanceType: "g5.xlarge", AZ: "us-east-1a", ProtectedFromScaleIn: true},
			{ID: "i-b", LifecycleState: "InService", InstanceType: "g5.xlarge", AZ: "us-east-1b", HealthStatus: "Unhealthy"},
			{ID: "i-c", LifecycleState: "Pending", InstanceType: "g5.2xlarge", AZ: "us-east-1a"},
			{ID: "i-d", LifecycleState: "Pending:Wait", InstanceType: "g5.xlarge", AZ: "us-east-1a", LifecycleToken: "tok-d"},
			{ID: "i-e", LifecycleState: "Pending:Proceed", InstanceType: "g5.xlarge", AZ: "us-east-1b"},
			{ID: "i-f", LifecycleState: "Terminating:Wait", InstanceType: "g5.xlarge", AZ: "us-east-1b", LifecycleToken: "tok-f"},
			{ID: "i-g", LifecycleState: "Standby", InstanceType: "g5.xlarge", AZ: "us-east-1a"},
			{ID: "i-h", LifecycleState: "Terminating", InstanceType: "g5.xlarge", AZ: "us-east-1a"},
		},
	}
}

func TestDescribeReportsCapacityAndInstanceStates(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	h.fake.PutGroup(localaws.ASGGroup{Name: "other", Max: 3, Desired: 1, Instances: []localaws.ASGInstance{{ID: "i-z", LifecycleState: "InService"}}})

	g, err := h.ad.Describe(context.Background(), "fleetq-dev-gpu")
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "fleetq-dev-gpu" || g.Desired != 8 || g.Min != 0 || g.Max != 10 {
		t.Fatalf("group = %+v", g)
	}
	if len(g.Instances) != 8 {
		t.Fatalf("instances = %d, want 8: %+v", len(g.Instances), g.Instances)
	}
	if got := g.InService(); got != 2 {
		t.Errorf("InService() = %d, want 2", got)
	}
	if got := g.Pending(); got != 3 {
		t.Errorf("Pending() = %d, want 3 (Pending, Pending:Wait, Pending:Proceed)", got)
	}
	want := scaling.Instance{ID: "i-a", LifecycleState: "InService", HealthStatus: "Healthy", InstanceType: "g5.xlarge", AZ: "us-east-1a", ProtectedFromScaleIn: true}
	if g.Instances[0] != want {
		t.Errorf("instance 0 = %+v, want %+v", g.Instances[0], want)
	}
	if g.Instances[1].HealthStatus != "Unhealthy" || g.Instances[1].ProtectedFromScaleIn {
		t.Errorf("instance 1 = %+v", g.Instances[1])
	}
	for _, in := range g.Instances {
		if !in.FirstSeen.IsZero() {
			t.Errorf("%s FirstSeen = %v, want zero (no launch time reported by the API)", in.ID, in.FirstSeen)
		}
	}
	calls := h.fake.Calls()
	if len(calls) != 1 || calls[0].Params.Get("AutoScalingGroupNames.member.1") != "fleetq-dev-gpu" {
		t.Errorf("calls = %+v, want one naming the group", calls)
	}
}

func TestDescribeEmptyGroup(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(localaws.ASGGroup{Name: "idle", Max: 4})
	g, err := h.ad.Describe(context.Background(), "idle")
	if err != nil {
		t.Fatal(err)
	}
	if g.Desired != 0 || g.Max != 4 || len(g.Instances) != 0 || g.InService() != 0 || g.Pending() != 0 {
		t.Fatalf("group = %+v", g)
	}
}

func TestDescribeUnknownGroup(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	_, err := h.ad.Describe(context.Background(), "nope")
	if !errors.Is(err, asg.ErrGroupNotFound) {
		t.Fatalf("err = %v, want ErrGroupNotFound", err)
	}
	if !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("error %q does not name the group", err)
	}
}

func TestSetDesired(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	if err := h.ad.SetDesired(context.Background(), "fleetq-dev-gpu", 3); err != nil {
		t.Fatal(err)
	}
	if got := h.fake.Desired("fleetq-dev-gpu"); got != 3 {
		t.Fatalf("desired = %d, want 3", got)
	}
	p := h.fake.Calls()[0].Params
	if p.Get("Action") != "SetDesiredCapacity" || p.Get("DesiredCapacity") != "3" || p.Get("HonorCooldown") != "false" {
		t.Errorf("request = %v", p)
	}
	if err := h.ad.SetDesired(context.Background(), "fleetq-dev-gpu", -1); err == nil {
		t.Error("SetDesired(-1) succeeded")
	}
	if n := len(h.fake.Calls()); n != 1 {
		t.Errorf("a negative capacity reached the API (%d calls)", n)
	}
}

func TestTerminateDecrementsDesiredAndRemovesInstance(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	if err := h.ad.Terminate(context.Background(), "i-b"); err != nil {
		t.Fatal(err)
	}
	g, err := h.ad.Describe(context.Background(), "fleetq-dev-gpu")
	if err != nil {
		t.Fatal(err)
	}
	if g.Desired != 7 {
		t.Errorf("desired = %d, want 7", g.Desired)
	}
	for _, in := range g.Instances {
		if in.ID == "i-b" {
			t.Errorf("i-b still in the group: %+v", in)
		}
	}
	if len(g.Instances) != 7 {
		t.Errorf("instances = %d, want 7", len(g.Instances))
	}
	p := h.fake.Calls()[0].Params
	if p.Get("InstanceId") != "i-b" || p.Get("ShouldDecrementDesiredCapacity") != "true" {
		t.Errorf("request = %v", p)
	}
}

func TestTerminateInstanceAlreadyGoneIsDone(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	if err := h.ad.Terminate(context.Background(), "i-b"); err != nil {
		t.Fatal(err)
	}
	if err := h.ad.Terminate(context.Background(), "i-b"); err != nil {
		t.Fatalf("second terminate: %v", err)
	}
	if err := h.ad.Terminate(context.Background(), "i-never"); err != nil {
		t.Fatalf("unknown instance: %v", err)
	}
	if got := h.fake.Desired("fleetq-dev-gpu"); got != 7 {
		t.Errorf("desired = %d, want 7 (decremented once)", got)
	}
	if n := h.fake.CallCount("TerminateInstanceInAutoScalingGroup"); n != 3 {
		t.Errorf("terminate calls = %d, want 3 (no retries of a gone instance)", n)
	}
}

func TestTerminateOtherValidationErrorIsReturned(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(localaws.ASGGroup{Name: "floor", Min: 1, Max: 2, Desired: 1, Instances: []localaws.ASGInstance{{ID: "i-1", LifecycleState: "InService"}}})
	err := h.ad.Terminate(context.Background(), "i-1")
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" {
		t.Fatalf("err = %v, want the service's ValidationError (desired at minimum)", err)
	}
	if !strings.Contains(err.Error(), "i-1") {
		t.Errorf("error %q does not name the instance", err)
	}
	if g, _ := h.fake.Group("floor"); len(g.Instances) != 1 || g.Desired != 1 {
		t.Errorf("group changed: %+v", g)
	}
}

func TestCompleteLifecycle(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	ctx := context.Background()
	if err := h.ad.CompleteLifecycle(ctx, "fleetq-dev-gpu", "launch", "i-d", "tok-d"); err != nil {
		t.Fatal(err)
	}
	if err := h.ad.CompleteLifecycle(ctx, "fleetq-dev-gpu", "drain", "", "tok-f"); err != nil {
		t.Fatalf("by token only: %v", err)
	}
	got := h.fake.LifecycleCompletions()
	want := []localaws.ASGLifecycleCompletion{
		{Group: "fleetq-dev-gpu", Hook: "launch", InstanceID: "i-d", Token: "tok-d", Result: "CONTINUE"},
		{Group: "fleetq-dev-gpu", Hook: "drain", InstanceID: "i-f", Token: "tok-f", Result: "CONTINUE"},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("completions = %+v, want %+v", got, want)
	}
	if p := h.fake.Calls()[1].Params; p.Has("InstanceId") {
		t.Errorf("token-only completion sent InstanceId: %v", p)
	}
	g, err := h.ad.Describe(ctx, "fleetq-dev-gpu")
	if err != nil {
		t.Fatal(err)
	}
	if g.InService() != 3 || g.Pending() != 2 {
		t.Errorf("after CONTINUE: in service %d (want 3), pending %d (want 2)", g.InService(), g.Pending())
	}

	err = h.ad.CompleteLifecycle(ctx, "fleetq-dev-gpu", "launch", "i-a", "")
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" {
		t.Fatalf("completing with no action waiting: err = %v, want ValidationError", err)
	}
	if !errors.Is(err, asg.ErrNoActiveLifecycleAction) {
		t.Errorf("completing with no action waiting: err = %v, want ErrNoActiveLifecycleAction", err)
	}
	for _, s := range []string{"fleetq-dev-gpu", "launch", "i-a"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestCompleteLifecycleNoActiveAction(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	ctx := context.Background()
	// Completed once; the second completion (a duplicate event) finds no
	// action, by instance or by token alone.
	if err := h.ad.CompleteLifecycle(ctx, "fleetq-dev-gpu", "drain", "i-f", "tok-f"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ instance, token string }{{"i-f", "tok-f"}, {"", "tok-f"}, {"i-unknown", ""}} {
		err := h.ad.CompleteLifecycle(ctx, "fleetq-dev-gpu", "drain", c.instance, c.token)
		if !errors.Is(err, asg.ErrNoActiveLifecycleAction) {
			t.Errorf("%+v: err = %v, want ErrNoActiveLifecycleAction", c, err)
		}
	}
	// Not retried: one request each.
	if n := h.fake.CallCount("CompleteLifecycleAction"); n != 4 {
		t.Errorf("CompleteLifecycleAction requests = %d, want 4", n)
	}
	// Other validation errors are not it.
	for _, c := range []struct{ group, hook string }{{"fleetq-dev-gpu", "no-such-hook"}, {"no-such-group", "drain"}} {
		err := h.ad.CompleteLifecycle(ctx, c.group, c.hook, "i-d", "tok-d")
		if err == nil || errors.Is(err, asg.ErrNoActiveLifecycleAction) {
			t.Errorf("%+v: err = %v, want another error", c, err)
		}
	}
}

func TestThrottlingAndServerErrorsAreRetriedWithBackoff(t *testing.T) {
	cases := []localaws.ASGError{
		{Status: http.StatusBadRequest, Code: "Throttling", Message: "Rate exceeded"},
		{Status: http.StatusBadRequest, Code: "ThrottlingException", Message: "Rate exceeded"},
		{Status: http.StatusBadRequest, Code: "RequestLimitExceeded", Message: "Request limit exceeded."},
		{Status: http.StatusBadRequest, Code: "ResourceContention", Message: "You already have a pending update to an Auto Scaling resource."},
		{Status: http.StatusInternalServerError, Code: "InternalFailure", Message: "internal error"},
		{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailable", Message: "unavailable"},
	}
	for _, e := range cases {
		t.Run(e.Code, func(t *testing.T) {
			h := newHarness(t, asg.Options{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second})
			h.fake.PutGroup(gpuGroup())
			h.fake.FailNext("SetDesiredCapacity", 3, e)
			if err := h.ad.SetDesired(context.Background(), "fleetq-dev-gpu", 2); err != nil {
				t.Fatal(err)
			}
			if got := h.fake.Desired("fleetq-dev-gpu"); got != 2 {
				t.Errorf("desired = %d, want 2", got)
			}
			if n := h.fake.CallCount("SetDesiredCapacity"); n != 4 {
				t.Errorf("requests = %d, want 4 (3 failures, then success)", n)
			}
			waits := h.sleeps.got()
			if len(waits) != 3 {
				t.Fatalf("waits = %v, want 3", waits)
			}
			for i, d := range waits {
				hi := 100 * time.Millisecond << i
				if d < hi/2 || d > hi {
					t.Errorf("wait %d = %v, want in [%v, %v]", i, d, hi/2, hi)
				}
			}
		})
	}
}

func TestThrottlingExhaustsRetries(t *testing.T) {
	h := newHarness(t, asg.Options{Retries: 2, BaseDelay: time.Second, MaxDelay: 1500 * time.Millisecond})
	h.fake.PutGroup(gpuGroup())
	h.fake.Throttle("", 10)
	_, err := h.ad.Describe(context.Background(), "fleetq-dev-gpu")
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "Throttling" {
		t.Fatalf("err = %v, want Throttling", err)
	}
	if !strings.Contains(err.Error(), `describe auto scaling group "fleetq-dev-gpu"`) || !strings.Contains(err.Error(), "3 attempts") {
		t.Errorf("error %q lacks the operation, group or attempts", err)
	}
	if n := len(h.fake.Calls()); n != 3 {
		t.Errorf("requests = %d, want 3 (1 + 2 retries)", n)
	}
	waits := h.sleeps.got()
	if len(waits) != 2 || waits[1] > 1500*time.Millisecond || waits[1] < 750*time.Millisecond {
		t.Errorf("waits = %v, want 2, the second capped at 1.5s", waits)
	}
}

func TestDefaultRetriesAreFive(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	h.fake.Throttle("", 100)
	if err := h.ad.Terminate(context.Background(), "i-a"); err == nil {
		t.Fatal("terminate succeeded under constant throttling")
	}
	if n := len(h.fake.Calls()); n != 6 {
		t.Errorf("requests = %d, want 6", n)
	}
}

func TestNoRetriesAndNoSDKRetries(t *testing.T) {
	// With the adapter's retries off, one throttled answer is one request:
	// nothing underneath retried it either.
	h := newHarness(t, asg.Options{Retries: -1})
	h.fake.PutGroup(gpuGroup())
	h.fake.Throttle("", 1)
	if err := h.ad.SetDesired(context.Background(), "fleetq-dev-gpu", 1); err == nil {
		t.Fatal("throttled call succeeded")
	}
	if n := len(h.fake.Calls()); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestNonRetryableErrorReturnedAtOnce(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	h.fake.FailNext("", 1, localaws.ASGError{Status: http.StatusForbidden, Code: "AccessDenied", Message: "not authorized"})
	err := h.ad.SetDesired(context.Background(), "fleetq-dev-gpu", 1)
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" {
		t.Fatalf("err = %v, want AccessDenied", err)
	}
	if !strings.Contains(err.Error(), `set desired capacity of auto scaling group "fleetq-dev-gpu"`) {
		t.Errorf("error %q lacks the operation and group", err)
	}
	if n := len(h.fake.Calls()); n != 1 || len(h.sleeps.got()) != 0 {
		t.Errorf("requests = %d, waits = %v; want 1 and none", n, h.sleeps.got())
	}

	// The service's own validation answer: not retried either.
	err = h.ad.SetDesired(context.Background(), "fleetq-dev-gpu", 11)
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" {
		t.Fatalf("err = %v, want ValidationError (above max)", err)
	}
	if n := len(h.fake.Calls()); n != 2 {
		t.Errorf("requests = %d, want 2", n)
	}
	if got := h.fake.Desired("fleetq-dev-gpu"); got != 8 {
		t.Errorf("desired = %d, want 8 unchanged", got)
	}
}

func TestCanceledContextStopsRetrying(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := newHarness(t, asg.Options{Sleep: func(context.Context, time.Duration) error {
		cancel()
		return context.Canceled
	}})
	h.fake.PutGroup(gpuGroup())
	h.fake.Throttle("", 10)
	err := h.ad.SetDesired(ctx, "fleetq-dev-gpu", 1)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := len(h.fake.Calls()); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestHeartbeatLifecycleKeepsTheActionWaiting(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	ctx := context.Background()
	if err := h.ad.HeartbeatLifecycle(ctx, "fleetq-dev-gpu", "drain", "i-f", "tok-f"); err != nil {
		t.Fatal(err)
	}
	if err := h.ad.HeartbeatLifecycle(ctx, "fleetq-dev-gpu", "drain", "i-f", ""); err != nil {
		t.Fatalf("by instance only: %v", err)
	}
	got := h.fake.LifecycleHeartbeats()
	want := []localaws.ASGLifecycleHeartbeat{
		{Group: "fleetq-dev-gpu", Hook: "drain", InstanceID: "i-f", Token: "tok-f"},
		{Group: "fleetq-dev-gpu", Hook: "drain", InstanceID: "i-f"},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("heartbeats = %+v, want %+v", got, want)
	}
	if p := h.fake.Calls()[1].Params; p.Has("LifecycleActionToken") {
		t.Errorf("instance-only heartbeat sent a token: %v", p)
	}
	// Still waiting: a heartbeat completes nothing.
	g, _ := h.fake.Group("fleetq-dev-gpu")
	if len(g.Instances) != 8 || len(h.fake.LifecycleCompletions()) != 0 {
		t.Fatalf("after heartbeats: %d instances, completions %+v", len(g.Instances), h.fake.LifecycleCompletions())
	}
	// Once completed, heartbeats meet no active action.
	if err := h.ad.CompleteLifecycle(ctx, "fleetq-dev-gpu", "drain", "i-f", "tok-f"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ instance, token string }{{"i-f", "tok-f"}, {"", "tok-f"}, {"i-a", ""}} {
		err := h.ad.HeartbeatLifecycle(ctx, "fleetq-dev-gpu", "drain", c.instance, c.token)
		if !errors.Is(err, asg.ErrNoActiveLifecycleAction) {
			t.Errorf("%+v: err = %v, want ErrNoActiveLifecycleAction", c, err)
		}
	}
	// An unknown group or hook is another error.
	for _, c := range []struct{ group, hook string }{{"nope", "launch"}, {"fleetq-dev-gpu", "nope"}} {
		err := h.ad.HeartbeatLifecycle(ctx, c.group, c.hook, "i-d", "tok-d")
		if err == nil || errors.Is(err, asg.ErrNoActiveLifecycleAction) {
			t.Errorf("%+v: err = %v, want a plain validation error", c, err)
		}
	}
}

func TestHeartbeatLifecycleRetriesThrottling(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	h.fake.Throttle("RecordLifecycleActionHeartbeat", 2)
	if err := h.ad.HeartbeatLifecycle(context.Background(), "fleetq-dev-gpu", "drain", "i-f", "tok-f"); err != nil {
		t.Fatal(err)
	}
	if n := h.fake.CallCount("RecordLifecycleActionHeartbeat"); n != 3 || len(h.fake.LifecycleHeartbeats()) != 1 {
		t.Fatalf("requests %d, heartbeats %+v: want 3 requests and one heartbeat", n, h.fake.LifecycleHeartbeats())
	}
}

func TestEndLifecycleWaitTimesTheActionOut(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	if !h.fake.EndLifecycleWait("i-f") || h.fake.EndLifecycleWait("i-f") || h.fake.EndLifecycleWait("i-a") {
		t.Fatal("EndLifecycleWait: want true once for the waiting instance, false after and for one in service")
	}
	err := h.ad.HeartbeatLifecycle(context.Background(), "fleetq-dev-gpu", "drain", "i-f", "tok-f")
	if !errors.Is(err, asg.ErrNoActiveLifecycleAction) {
		t.Fatalf("heartbeat after the timeout: %v", err)
	}
}

// A connection broken before or after the service acted is retried like a
// throttle: every call of the adapter is safe to repeat (a repeated
// terminate finds the instance gone, a repeated desired capacity sets the
// same number).
func TestBrokenConnectionsAreRetried(t *testing.T) {
	for _, kind := range []faultproxy.Kind{faultproxy.ResetBefore, faultproxy.ResetAfter} {
		t.Run(string(kind), func(t *testing.T) {
			fake, err := localaws.StartAutoScaling("")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = fake.Close() })
			proxy, err := faultproxy.Start(fake.URL, faultproxy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = proxy.Close() })
			s := &sleeps{}
			ad := asg.New(autoscaling.NewFromConfig(localaws.Config(proxy.URL), asg.WithoutSDKRetries), asg.Options{Sleep: s.Sleep})
			fake.PutGroup(gpuGroup())
			proxy.Next("SetDesiredCapacity", kind, kind)
			if err := ad.SetDesired(context.Background(), "fleetq-dev-gpu", 3); err != nil {
				t.Fatal(err)
			}
			proxy.Next("TerminateInstanceInAutoScalingGroup", kind)
			if err := ad.Terminate(context.Background(), "i-a"); err != nil {
				t.Fatal(err)
			}
			if got := fake.Desired("fleetq-dev-gpu"); got != 2 {
				t.Errorf("desired = %d, want 2 (set to 3, then one instance terminated once)", got)
			}
			if n := len(s.got()); n != 3 {
				t.Errorf("waits = %v, want 3 (one per broken connection)", s.got())
			}
		})
	}
}

// InstanceGroup finds an instance's group and state among every group
// (DescribeAutoScalingInstances), answers "" for an instance in none, and
// retries throttling.
func TestInstanceGroup(t *testing.T) {
	h := newHarness(t, asg.Options{})
	h.fake.PutGroup(gpuGroup())
	h.fake.PutGroup(localaws.ASGGroup{Name: "fleetq-dev-gpu-od", Max: 2, Instances: []localaws.ASGInstance{{ID: "i-od", LifecycleState: "InService"}}})
	ctx := context.Background()
	for id, want := range map[string][2]string{
		"i-a": {"fleetq-dev-gpu", "InService"}, "i-d": {"fleetq-dev-gpu", "Pending:Wait"},
		"i-f": {"fleetq-dev-gpu", "Terminating:Wait"}, "i-od": {"fleetq-dev-gpu-od", "InService"}, "i-none": {"", ""},
	} {
		g, s, err := h.ad.InstanceGroup(ctx, id)
		if err != nil || g != want[0] || s != want[1] {
			t.Errorf("InstanceGroup(%s) = %q, %q, %v; want %v", id, g, s, err, want)
		}
	}
	h.fake.Throttle("DescribeAutoScalingInstances", 2)
	if g, _, err := h.ad.InstanceGroup(ctx, "i-a"); err != nil || g != "fleetq-dev-gpu" {
		t.Fatalf("after throttling: %q, %v", g, err)
	}
}
