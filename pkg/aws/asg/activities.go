package asg

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
)

// shortMarkers are the parts of a failed launch's StatusMessage that say
// the instance could not be placed for lack of capacity (or of Spot
// quota, which On-Demand does not share). Messages the groups write:
// "Could not launch Spot Instances. InsufficientInstanceCapacity - There
// is no Spot capacity available that matches your request. Launching EC2
// instance failed." and "We currently do not have sufficient g5.xlarge
// capacity in the Availability Zone you requested (us-east-1a). ..."
// (docs/scaling.md lists where they were seen).
var shortMarkers = []string{
	"insufficientinstancecapacity",
	"no spot capacity available",
	"do not have sufficient",
	"unfulfillablecapacity",
	"max spot instance count exceeded",
	"maxspotinstancecountexceeded",
}

// LaunchFailedForCapacity reports whether a scaling activity's
// StatusMessage says a launch failed for lack of capacity.
func LaunchFailedForCapacity(statusMessage string) bool {
	m := strings.ToLower(statusMessage)
	for _, s := range shortMarkers {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// activityPages bounds how far back ShortSince reads (100 activities a
// page): a run of failures older than that counts from the oldest read.
const activityPages = 5

// ShortSince reads the group's recent scaling activities (newest first)
// and answers when the current run of launches failed for lack of
// capacity began: the start of the oldest such failure with no successful
// launch after it. Zero means the group's launches are not failing for
// capacity: the newest launch succeeded, or none failed so. Failures for
// other reasons (a bad image, a missing role) and activities that are not
// launches neither start nor end a run.
func (a *Adapter) ShortSince(ctx context.Context, groupName string) (time.Time, error) {
	var since time.Time
	var token *string
	for range activityPages {
		var out *autoscaling.DescribeScalingActivitiesOutput
		err := a.retry(ctx, func() error {
			var err error
			out, err = a.api.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{
				AutoScalingGroupName: aws.String(groupName), MaxRecords: aws.Int32(100), NextToken: token,
			})
			return err
		})
		if err != nil {
			return time.Time{}, fmt.Errorf("describe scaling activities of auto scaling group %q: %w", groupName, err)
		}
		for _, act := range out.Activities {
			if !isLaunch(act) {
				continue
			}
			switch act.StatusCode {
			case types.ScalingActivityStatusCodeFailed, types.ScalingActivityStatusCodeCancelled:
				if LaunchFailedForCapacity(aws.ToString(act.StatusMessage)) {
					since = aws.ToTime(act.StartTime)
				}
			case types.ScalingActivityStatusCodeSuccessful:
				return since, nil
			}
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		token = out.NextToken
	}
	return since, nil
}

// isLaunch tells launches from terminations and other activities by the
// description the service writes ("Launching a new EC2 instance: i-...",
// "Launching a new EC2 instance.  Status Reason: ...").
func isLaunch(act types.Activity) bool {
	return strings.HasPrefix(aws.ToString(act.Description), "Launching")
}
