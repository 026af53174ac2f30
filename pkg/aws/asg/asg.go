package asg

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"

	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// Lifecycle states the scaler counts (the service's own names, defined with
// the instance type in pkg/domain/scaling).
const (
	StateInService      = scaling.StateInService
	StatePending        = scaling.StatePending
	StatePendingWait    = scaling.StatePendingWait
	StatePendingProceed = scaling.StatePendingProceed
)

// ErrGroupNotFound is returned by Describe when no group has the name.
var ErrGroupNotFound = errors.New("auto scaling group not found")

// ErrNoActiveLifecycleAction is returned (wrapping the service's error) by
// CompleteLifecycle and HeartbeatLifecycle when the instance or token has no lifecycle action
// waiting: it was completed already, it timed out, or there never was one.
// A duplicate delivery of a lifecycle event meets it.
var ErrNoActiveLifecycleAction = errors.New("no active lifecycle action")

// Group is a group's capacity and instances.
type Group struct {
	Name              string
	Desired, Min, Max int
	// Instances are as DescribeAutoScalingGroups reports them, in every
	// lifecycle state (FirstSeen left zero).
	Instances []scaling.Instance
	// Types are the instance types of the group's mixed instances policy
	// overrides, in their priority order (none for a group without one).
	Types []string
	// Subnets are the group's subnets (its VPCZoneIdentifier), in order.
	Subnets []string
	// LaunchTemplateID is the launch template of the group's mixed
	// instances policy ("" for a group without one): a fleet's Spot pool
	// launches from its Spot group's.
	LaunchTemplateID string
}

// InService counts the instances in service.
func (g Group) InService() int {
	n := 0
	for _, in := range g.Instances {
		if in.InService() {
			n++
		}
	}
	return n
}

// Pending counts the instances still booting: Pending, Pending:Wait (a
// launch lifecycle hook holds them) and Pending:Proceed.
func (g Group) Pending() int {
	n := 0
	for _, in := range g.Instances {
		if in.Booting() {
			n++
		}
	}
	return n
}

// API is the part of *autoscaling.Client the adapter uses.
type API interface {
	DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
	UpdateAutoScalingGroup(context.Context, *autoscaling.UpdateAutoScalingGroupInput, ...func(*autoscaling.Options)) (*autoscaling.UpdateAutoScalingGroupOutput, error)
	SetDesiredCapacity(context.Context, *autoscaling.SetDesiredCapacityInput, ...func(*autoscaling.Options)) (*autoscaling.SetDesiredCapacityOutput, error)
	TerminateInstanceInAutoScalingGroup(context.Context, *autoscaling.TerminateInstanceInAutoScalingGroupInput, ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error)
	CompleteLifecycleAction(context.Context, *autoscaling.CompleteLifecycleActionInput, ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error)
	RecordLifecycleActionHeartbeat(context.Context, *autoscaling.RecordLifecycleActionHeartbeatInput, ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error)
	DescribeScalingActivities(context.Context, *autoscaling.DescribeScalingActivitiesInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeScalingActivitiesOutput, error)
	SetInstanceProtection(context.Context, *autoscaling.SetInstanceProtectionInput, ...func(*autoscaling.Options)) (*autoscaling.SetInstanceProtectionOutput, error)
	DescribeAutoScalingInstances(context.Context, *autoscaling.DescribeAutoScalingInstancesInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingInstancesOutput, error)
}

// WithoutSDKRetries is a client option that turns off the SDK's own retries,
// leaving them to the adapter: autoscaling.NewFromConfig(cfg, asg.WithoutSDKRetries).
func WithoutSDKRetries(o *autoscaling.Options) {
	o.Retryer = aws.NopRetryer{}
}

// Options tune the adapter's retries. The zero value is usable.
type Options struct {
	// Retries is how many times a retryable failure is retried (so at most
	// Retries+1 requests per call). 0 means 5; negative means none.
	Retries int
	// BaseDelay is the wait before the first retry; each further retry
	// doubles it, up to MaxDelay. Each wait is drawn uniformly from
	// [d/2, d] (jitter). 0 means 100ms.
	BaseDelay time.Duration
	// MaxDelay caps one wait. 0 means 5s.
	MaxDelay time.Duration
	// Sleep waits d or until ctx is done. nil means a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Adapter runs the scaler's Auto Scaling calls.
type Adapter struct {
	api  API
	opts Options
}

// New returns an adapter over api (see WithoutSDKRetries).
func New(api API, opts Options) *Adapter {
	switch {
	case opts.Retries == 0:
		opts.Retries = 5
	case opts.Retries < 0:
		opts.Retries = 0
	}
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = 100 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 5 * time.Second
	}
	if opts.MaxDelay < opts.BaseDelay {
		opts.MaxDelay = opts.BaseDelay
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	return &Adapter{api: api, opts: opts}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Describe returns the group named groupName with all its instances.
func (a *Adapter) Describe(ctx context.Context, groupName string) (Group, error) {
	var (
		found *types.AutoScalingGroup
		token *string
	)
	// Pages are of groups, not instances: a group comes whole in one page.
	// Only one group can match the name, but follow NextToken all the same
	// rather than assume which page holds it.
	for {
		var out *autoscaling.DescribeAutoScalingGroupsOutput
		err := a.retry(ctx, func() error {
			var err error
			out, err = a.api.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{
				AutoScalingGroupNames: []string{groupName},
				NextToken:             token,
			})
			return err
		})
		if err != nil {
			return Group{}, fmt.Errorf("describe auto scaling group %q: %w", groupName, err)
		}
		for i := range out.AutoScalingGroups {
			if aws.ToString(out.AutoScalingGroups[i].AutoScalingGroupName) == groupName {
				found = &out.AutoScalingGroups[i]
			}
		}
		if found != nil || aws.ToString(out.NextToken) == "" {
			break
		}
		token = out.NextToken
	}
	if found == nil {
		return Group{}, fmt.Errorf("describe auto scaling group %q: %w", groupName, ErrGroupNotFound)
	}
	g := Group{
		Name:    groupName,
		Desired: int(aws.ToInt32(found.DesiredCapacity)),
		Min:     int(aws.ToInt32(found.MinSize)),
		Max:     int(aws.ToInt32(found.MaxSize)),
	}
	if mip := found.MixedInstancesPolicy; mip != nil && mip.LaunchTemplate != nil {
		if spec := mip.LaunchTemplate.LaunchTemplateSpecification; spec != nil {
			g.LaunchTemplateID = aws.ToString(spec.LaunchTemplateId)
		}
		for _, o := range mip.LaunchTemplate.Overrides {
			g.Types = append(g.Types, aws.ToString(o.InstanceType))
		}
	}
	for _, sn := range strings.Split(aws.ToString(found.VPCZoneIdentifier), ",") {
		if sn = strings.TrimSpace(sn); sn != "" {
			g.Subnets = append(g.Subnets, sn)
		}
	}
	for _, in := range found.Instances {
		g.Instances = append(g.Instances, scaling.Instance{
			ID:                   aws.ToString(in.InstanceId),
			LifecycleState:       string(in.LifecycleState),
			HealthStatus:         aws.ToString(in.HealthStatus),
			InstanceType:         aws.ToString(in.InstanceType),
			AZ:                   aws.ToString(in.AvailabilityZone),
			ProtectedFromScaleIn: aws.ToBool(in.ProtectedFromScaleIn),
		})
	}
	return g, nil
}

// InstanceGroup answers the group an instance belongs to and its lifecycle
// state there (DescribeAutoScalingInstances); group "" when no group has
// it. Attested registration checks a worker's instance with it.
func (a *Adapter) InstanceGroup(ctx context.Context, instanceID string) (group, state string, err error) {
	var out *autoscaling.DescribeAutoScalingInstancesOutput
	err = a.retry(ctx, func() error {
		var err error
		out, err = a.api.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{instanceID}})
		return err
	})
	if err != nil {
		return "", "", fmt.Errorf("describe auto scaling instance %s: %w", instanceID, err)
	}
	for _, in := range out.AutoScalingInstances {
		if aws.ToString(in.InstanceId) == instanceID {
			return aws.ToString(in.AutoScalingGroupName), aws.ToString(in.LifecycleState), nil
		}
	}
	return "", "", nil
}

// SetDesired sets the group's desired capacity to n, ignoring any cooldown:
// the scaler has its own pacing.
func (a *Adapter) SetDesired(ctx context.Context, groupName string, n int) error {
	if n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("set desired capacity of auto scaling group %q: %d out of range", groupName, n)
	}
	err := a.retry(ctx, func() error {
		_, err := a.api.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{
			AutoScalingGroupName: aws.String(groupName),
			DesiredCapacity:      aws.Int32(int32(n)),
			HonorCooldown:        aws.Bool(false),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("set desired capacity of auto scaling group %q to %d: %w", groupName, n, err)
	}
	return nil
}

// Place sets the priority order of the instance types of the group's
// mixed instances policy (its launch template overrides, each an instance
// type alone) and the subnets it launches in. Nil leaves either as it is;
// the rest of the policy (launch template, distribution) is not sent and
// stays. Running instances are not touched: the order and subnets apply to
// the next launches.
func (a *Adapter) Place(ctx context.Context, groupName string, instanceTypes, subnets []string) error {
	in := &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(groupName)}
	if instanceTypes != nil {
		var overrides []types.LaunchTemplateOverrides
		for _, t := range instanceTypes {
			overrides = append(overrides, types.LaunchTemplateOverrides{InstanceType: aws.String(t)})
		}
		in.MixedInstancesPolicy = &types.MixedInstancesPolicy{LaunchTemplate: &types.LaunchTemplate{Overrides: overrides}}
	}
	if subnets != nil {
		if len(subnets) == 0 {
			return fmt.Errorf("update auto scaling group %q: no subnet to launch in", groupName)
		}
		in.VPCZoneIdentifier = aws.String(strings.Join(subnets, ","))
	}
	err := a.retry(ctx, func() error {
		_, err := a.api.UpdateAutoScalingGroup(ctx, in)
		return err
	})
	if err != nil {
		return fmt.Errorf("update instance types and subnets of auto scaling group %q: %w", groupName, err)
	}
	return nil
}

// Terminate terminates one instance and lowers its group's desired capacity
// by one, so the group does not launch a replacement. An instance the
// service no longer knows counts as terminated.
func (a *Adapter) Terminate(ctx context.Context, instanceID string) error {
	err := a.retry(ctx, func() error {
		_, err := a.api.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId:                     aws.String(instanceID),
			ShouldDecrementDesiredCapacity: aws.Bool(true),
		})
		return err
	})
	if err != nil && !instanceGone(err) {
		return fmt.Errorf("terminate instance %s in its auto scaling group: %w", instanceID, err)
	}
	return nil
}

// instanceGone reports the service's answer for an instance that is not (or
// no longer) in any group: ValidationError "Instance Id not found - No
// managed instance found for instance ID: i-...".
func instanceGone(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" {
		return false
	}
	return strings.Contains(strings.ToLower(ae.ErrorMessage()), "not found")
}

// noActiveLifecycleAction reports the service's answer to completing a
// lifecycle action that is not (or no longer) waiting: ValidationError "No
// active Lifecycle Action found with instance ID i-..." (or "... with token
// ..." when only the token names it).
func noActiveLifecycleAction(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" {
		return false
	}
	return strings.HasPrefix(strings.ToLower(ae.ErrorMessage()), "no active lifecycle action")
}

// CompleteLifecycle completes the lifecycle action instanceID is waiting on
// with CONTINUE. token may be empty (the instance ID then names the action);
// instanceID may be empty if token is given. An action that is not waiting
// (any more) gives an error that matches ErrNoActiveLifecycleAction.
func (a *Adapter) CompleteLifecycle(ctx context.Context, groupName, hookName, instanceID, token string) error {
	in := &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName:  aws.String(groupName),
		LifecycleHookName:     aws.String(hookName),
		LifecycleActionResult: aws.String("CONTINUE"),
	}
	if instanceID != "" {
		in.InstanceId = aws.String(instanceID)
	}
	if token != "" {
		in.LifecycleActionToken = aws.String(token)
	}
	err := a.retry(ctx, func() error {
		_, err := a.api.CompleteLifecycleAction(ctx, in)
		return err
	})
	if err != nil && noActiveLifecycleAction(err) {
		return fmt.Errorf("complete lifecycle action %s of instance %s in auto scaling group %q: %w: %w", hookName, instanceID, groupName, ErrNoActiveLifecycleAction, err)
	}
	if err != nil {
		return fmt.Errorf("complete lifecycle action %s of instance %s in auto scaling group %q: %w", hookName, instanceID, groupName, err)
	}
	return nil
}

// HeartbeatLifecycle restarts the heartbeat timeout of the lifecycle action
// instanceID is waiting on, so the group keeps it in its wait state (never
// past the hook's global timeout: 100 heartbeat timeouts or 48 hours,
// whichever is less). token and instanceID name the action as for
// CompleteLifecycle. An action that is not waiting (any more: completed, or
// timed out and the instance gone on) gives an error that matches
// ErrNoActiveLifecycleAction.
func (a *Adapter) HeartbeatLifecycle(ctx context.Context, groupName, hookName, instanceID, token string) error {
	in := &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: aws.String(groupName),
		LifecycleHookName:    aws.String(hookName),
	}
	if instanceID != "" {
		in.InstanceId = aws.String(instanceID)
	}
	if token != "" {
		in.LifecycleActionToken = aws.String(token)
	}
	err := a.retry(ctx, func() error {
		_, err := a.api.RecordLifecycleActionHeartbeat(ctx, in)
		return err
	})
	if err != nil && noActiveLifecycleAction(err) {
		return fmt.Errorf("heartbeat lifecycle action %s of instance %s in auto scaling group %q: %w: %w", hookName, instanceID, groupName, ErrNoActiveLifecycleAction, err)
	}
	if err != nil {
		return fmt.Errorf("heartbeat lifecycle action %s of instance %s in auto scaling group %q: %w", hookName, instanceID, groupName, err)
	}
	return nil
}

// retry calls op until it succeeds, fails for good, or runs out of retries.
func (a *Adapter) retry(ctx context.Context, op func() error) error {
	delay := a.opts.BaseDelay
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil || !retryable(err) || attempt >= a.opts.Retries {
			if err != nil && attempt > 0 {
				return fmt.Errorf("after %d attempts: %w", attempt+1, err)
			}
			return err
		}
		// Uniform in [delay/2, delay]: spread out callers that failed
		// together, and still wait at least half of the backoff.
		wait := delay/2 + rand.N(delay/2+1)
		if serr := a.opts.Sleep(ctx, wait); serr != nil {
			return fmt.Errorf("%w (gave up waiting to retry: %w)", err, serr)
		}
		delay = min(delay*2, a.opts.MaxDelay)
	}
}

// retryable reports a throttled, contended or server-side failure, or a
// broken connection (before or after the service acted: every call here is
// safe to repeat, see Terminate and CompleteLifecycle for the answers a
// repeat meets).
func retryable(err error) bool {
	if (retry.RetryableConnectionError{}).IsErrorRetryable(err) == aws.TrueTernary {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "Throttling", "ThrottlingException", "RequestLimitExceeded", "ResourceContention":
			return true
		}
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() >= http.StatusInternalServerError
}
