// Package ec2pool adapts EC2 to what a fleet's stopped Spot pool needs
// (docs/scaling.md, "Cold start: the Spot pool"): launch an instance on one
// instance type and zone as a persistent Spot request that stops on
// interruption, start it, stop it, end it (cancel its request, then
// terminate it) and list the fleet's pool instances.
//
// # Errors
//
// A start EC2 refuses for want of Spot capacity answers ErrNoCapacity, and
// one it refuses because EC2 itself stopped the instance on an
// interruption answers ErrInterrupted; the caller tells them apart from
// any other failure with errors.Is.
//
// # Retries
//
// The SDK client's retryer retries throttling and 5xx answers, and every
// call is safe to repeat: RunInstances carries a client token, a repeated
// start, stop, cancel or terminate finds the work done. One 5xx is not
// retried: InsufficientInstanceCapacity is a server error (HTTP 500) that
// the SDK's standard retryer would repeat, and a pool start without
// capacity must fail at once so that its jobs go to On-Demand.
package ec2pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
	"github.com/fleetq/fleetq/pkg/domain/scaling"
)

// API is the part of the EC2 API the adapter uses; *ec2.Client satisfies it.
type API interface {
	RunInstances(context.Context, *ec2.RunInstancesInput, ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	StartInstances(context.Context, *ec2.StartInstancesInput, ...func(*ec2.Options)) (*ec2.StartInstancesOutput, error)
	StopInstances(context.Context, *ec2.StopInstancesInput, ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	CancelSpotInstanceRequests(context.Context, *ec2.CancelSpotInstanceRequestsInput, ...func(*ec2.Options)) (*ec2.CancelSpotInstanceRequestsOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

var (
	// ErrNoCapacity is a start (or launch) EC2 refused for want of Spot
	// capacity of the instance's type in its zone
	// (InsufficientInstanceCapacity); the instance stays stopped.
	ErrNoCapacity = errors.New("no Spot capacity")
	// ErrInterrupted is a start EC2 refused because it stopped the instance
	// on a Spot interruption: only EC2 starts it again, when capacity is back.
	ErrInterrupted = errors.New("stopped by EC2 on an interruption; only EC2 starts it again")
)

// The EC2 error codes the adapter tells apart.
const (
	codeNoCapacity      = "InsufficientInstanceCapacity"
	codeSpotState       = "IncorrectSpotRequestState"
	codeNotFound        = "InvalidInstanceID.NotFound"
	codeRequestNotFound = "InvalidSpotInstanceRequestID.NotFound"
	// reasonSpotShutdown is the state reason of an instance EC2 stopped on
	// a Spot interruption.
	reasonSpotShutdown = "Server.SpotInstanceShutdown"
)

// DefaultRootDevice is the root device the fleet's launch template maps
// (infra/fleets.go): the pool's volume size replaces that mapping's.
const DefaultRootDevice = "/dev/xvda"

// Pool is the EC2 side of one fleet's stopped Spot pool.
type Pool struct {
	EC2 API
	// Stage and Fleet tag every pool instance (fleetq:stage, fleetq:fleet,
	// with fleetq:pool=spot) and select them in Describe.
	Stage, Fleet string
	// LaunchTemplateID is the fleet's launch template; LaunchTemplateVersion
	// its version ("$Latest" when empty).
	LaunchTemplateID, LaunchTemplateVersion string
	// Subnets maps each zone of the pool's pairs to the fleet's subnet
	// there; a launch in a zone without one is refused. Empty: instances
	// are placed by zone alone (an account's default VPC).
	Subnets map[string]string
	// RootDevice is the device of the root volume ("/dev/xvda" when empty).
	RootDevice string
}

// Instance is one pool instance as EC2 reports it.
type Instance struct {
	ID   string
	Pair scaling.Pair
	// State is EC2's state name: pending, running, stopping, stopped,
	// shutting-down, terminated.
	State         string
	SpotRequestID string
	LaunchTime    time.Time
	// StateReason is the code of EC2's reason for the last stop or end
	// (Client.UserInitiatedShutdown, Server.SpotInstanceShutdown, ...).
	StateReason string
}

// Interrupted reports whether EC2 stopped the instance on a Spot
// interruption and holds it stopped: StartInstances on it is refused
// until EC2 starts it itself.
func (i Instance) Interrupted() bool {
	return (i.State == "stopping" || i.State == "stopped") && i.StateReason == reasonSpotShutdown
}

// Create launches one pool instance of the pair from the fleet's launch
// template: a persistent Spot request whose instances stop on interruption,
// a root volume of volumeGB (gp3, encrypted), tagged as the fleet's pool.
// token makes the launch idempotent (a repeat with the same token answers
// the same instance); empty, the SDK draws one per call.
func (p Pool) Create(ctx context.Context, pair scaling.Pair, volumeGB int, token string) (Instance, error) {
	in := &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateId: aws.String(p.LaunchTemplateID), Version: aws.String(p.templateVersion())},
		InstanceType:   ec2types.InstanceType(pair.InstanceType),
		Placement:      &ec2types.Placement{AvailabilityZone: aws.String(pair.Zone)},
		InstanceMarketOptions: &ec2types.InstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeSpot,
			SpotOptions: &ec2types.SpotMarketOptions{SpotInstanceType: ec2types.SpotInstanceTypePersistent,
				InstanceInterruptionBehavior: ec2types.InstanceInterruptionBehaviorStop}},
		BlockDeviceMappings: []ec2types.BlockDeviceMapping{{DeviceName: aws.String(p.rootDevice()), Ebs: &ec2types.EbsBlockDevice{
			VolumeSize: aws.Int32(int32(volumeGB)), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}}},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: p.tags()},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: p.tags()},
			{ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: p.tags()},
		},
	}
	if token != "" {
		in.ClientToken = aws.String(token)
	}
	if len(p.Subnets) > 0 {
		subnet, ok := p.Subnets[pair.Zone]
		if !ok {
			return Instance{}, fmt.Errorf("launch %s in %s: the fleet has no subnet in %s", pair.InstanceType, pair.Zone, pair.Zone)
		}
		in.SubnetId = aws.String(subnet)
	}
	out, err := p.EC2.RunInstances(ctx, in, noCapacityRetries)
	if err != nil {
		return Instance{}, fmt.Errorf("launch pool instance %s in %s: %w", pair.InstanceType, pair.Zone, classify(err))
	}
	if len(out.Instances) != 1 {
		return Instance{}, fmt.Errorf("launch pool instance %s in %s: EC2 answered %d instances", pair.InstanceType, pair.Zone, len(out.Instances))
	}
	return instanceOf(out.Instances[0]), nil
}

// Start starts a stopped pool instance. Without Spot capacity it answers
// ErrNoCapacity at once (not retried); on an instance EC2 stopped on an
// interruption, ErrInterrupted. Starting a pending or running instance
// changes nothing.
func (p Pool) Start(ctx context.Context, id string) error {
	if _, err := p.EC2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}}, noCapacityRetries); err != nil {
		return fmt.Errorf("start pool instance %s: %w", id, classify(err))
	}
	return nil
}

// Stop stops a running pool instance back into the pool; stopping a
// stopped one changes nothing.
func (p Pool) Stop(ctx context.Context, id string) error {
	if _, err := p.EC2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		return fmt.Errorf("stop pool instance %s: %w", id, classify(err))
	}
	return nil
}

// End ends a pool instance for good: it cancels the instance's Spot
// request first, since terminating the instance of a persistent request
// that is still open makes EC2 launch a replacement, then terminates it.
// An instance already gone is ended.
func (p Pool) End(ctx context.Context, id string) error {
	out, err := p.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if code(err) == codeNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("end pool instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if req := aws.ToString(in.SpotInstanceRequestId); req != "" {
				_, err := p.EC2.CancelSpotInstanceRequests(ctx, &ec2.CancelSpotInstanceRequestsInput{SpotInstanceRequestIds: []string{req}})
				if err != nil && code(err) != codeRequestNotFound {
					return fmt.Errorf("end pool instance %s: cancel its Spot request %s: %w", id, req, err)
				}
			}
		}
	}
	if _, err := p.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil && code(err) != codeNotFound {
		return fmt.Errorf("end pool instance %s: terminate: %w", id, err)
	}
	return nil
}

// Describe lists the fleet's pool instances that are not ended (pending,
// running, stopping or stopped), every page.
func (p Pool) Describe(ctx context.Context) ([]Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + fleetconfig.TagStage), Values: []string{p.Stage}},
		{Name: aws.String("tag:" + fleetconfig.TagFleet), Values: []string{p.Fleet}},
		{Name: aws.String("tag:" + fleetconfig.TagPool), Values: []string{fleetconfig.TagPoolSpot}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
	}}
	var out []Instance
	pages := ec2.NewDescribeInstancesPaginator(p.EC2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe pool instances of %s: %w", p.Fleet, err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out = append(out, instanceOf(i))
			}
		}
	}
	slices.SortFunc(out, func(a, b Instance) int {
		if c := a.LaunchTime.Compare(b.LaunchTime); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

func (p Pool) templateVersion() string {
	if p.LaunchTemplateVersion == "" {
		return "$Latest"
	}
	return p.LaunchTemplateVersion
}

func (p Pool) rootDevice() string {
	if p.RootDevice == "" {
		return DefaultRootDevice
	}
	return p.RootDevice
}

func (p Pool) tags() []ec2types.Tag {
	return []ec2types.Tag{
		{Key: aws.String(fleetconfig.TagStage), Value: aws.String(p.Stage)},
		{Key: aws.String(fleetconfig.TagFleet), Value: aws.String(p.Fleet)},
		{Key: aws.String(fleetconfig.TagPool), Value: aws.String(fleetconfig.TagPoolSpot)},
		{Key: aws.String("Name"), Value: aws.String("fleetq-" + p.Stage + "-" + p.Fleet + "-pool")},
	}
}

func instanceOf(i ec2types.Instance) Instance {
	out := Instance{ID: aws.ToString(i.InstanceId), SpotRequestID: aws.ToString(i.SpotInstanceRequestId), LaunchTime: aws.ToTime(i.LaunchTime),
		Pair: scaling.Pair{InstanceType: string(i.InstanceType)}}
	if i.Placement != nil {
		out.Pair.Zone = aws.ToString(i.Placement.AvailabilityZone)
	}
	if i.State != nil {
		out.State = string(i.State.Name)
	}
	if i.StateReason != nil {
		out.StateReason = aws.ToString(i.StateReason.Code)
	}
	return out
}

func code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// classify wraps the errors a caller tells apart in their sentinels.
func classify(err error) error {
	switch code(err) {
	case codeNoCapacity:
		return fmt.Errorf("%w: %w", ErrNoCapacity, err)
	case codeSpotState:
		return fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	return err
}

// noCapacityRetries makes the call's retryer leave
// InsufficientInstanceCapacity alone.
func noCapacityRetries(o *ec2.Options) {
	if o.Retryer != nil {
		o.Retryer = capacityFinal{o.Retryer}
	}
}

// capacityFinal is a retryer that does not retry a refusal for capacity.
type capacityFinal struct{ aws.Retryer }

// IsErrorRetryable implements aws.Retryer.
func (r capacityFinal) IsErrorRetryable(err error) bool {
	return code(err) != codeNoCapacity && r.Retryer.IsErrorRetryable(err)
}
