package asg

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
)

// StopIntoPool scales a group with a warm pool (ReuseOnScaleIn on) in by
// one named instance, which goes back into the pool stopped. The group
// chooses scale-in victims itself, among instances not protected from
// scale-in, so the adapter makes that choice a single one: it protects
// every other instance of the group (whether an instance started from
// the pool keeps its protection is not counted on), lifts the protection of the named one, and
// lowers the desired capacity by one. TerminateInstanceInAutoScalingGroup
// is not used: it ends the instance instead of returning it.
func (a *Adapter) StopIntoPool(ctx context.Context, groupName, instanceID string) error {
	g, err := a.Describe(ctx, groupName)
	if err != nil {
		return fmt.Errorf("stop %s into the pool: %w", instanceID, err)
	}
	var others []string
	found := false
	for _, in := range g.Instances {
		switch {
		case in.ID == instanceID:
			found = true
		case !in.ProtectedFromScaleIn && (in.InService() || in.Booting()):
			others = append(others, in.ID)
		}
	}
	if !found {
		return nil // already gone
	}
	if len(others) > 0 {
		if err := a.protect(ctx, groupName, others, true); err != nil {
			return fmt.Errorf("stop %s into the pool: %w", instanceID, err)
		}
	}
	if err := a.protect(ctx, groupName, []string{instanceID}, false); err != nil {
		return fmt.Errorf("stop %s into the pool: %w", instanceID, err)
	}
	return a.SetDesired(ctx, groupName, max(0, g.Desired-1))
}

func (a *Adapter) protect(ctx context.Context, groupName string, ids []string, on bool) error {
	return a.retry(ctx, func() error {
		_, err := a.api.SetInstanceProtection(ctx, &autoscaling.SetInstanceProtectionInput{
			AutoScalingGroupName: aws.String(groupName), InstanceIds: ids, ProtectedFromScaleIn: aws.Bool(on),
		})
		return err
	})
}
