// Package events holds sample events for every fleetq function, as the AWS
// service delivers them: API Gateway HTTP API (payload v2) requests, an SQS
// batch, the scheduler tick, and the EC2 and Auto Scaling events. Tests read
// them through FS; people can replay them by hand (POST /local/events in the
// dev stack, or `sam local invoke -e`).
//
// # Where each sample comes from
//
// Every sample follows the event shape AWS documents for it, with fleetq's
// own names (group fleetq-dev-demo, hook fleetq-drain, instance
// i-0abc1234def567890, dates in 2026) in place of the documentation's
// placeholders:
//
//   - ec2-spot-interruption-warning.json: the "EC2 Spot Instance
//     Interruption Warning" event of the Amazon EC2 User Guide, "Spot
//     Instance interruption notices" (detail: instance-id, instance-action);
//   - ec2-rebalance-recommendation.json: the "EC2 Instance Rebalance
//     Recommendation" event of the Amazon EC2 User Guide, "EC2 instance
//     rebalance recommendations" (detail: instance-id);
//   - ec2-instance-state-change-terminated.json: the "EC2 Instance
//     State-change Notification" event of the Amazon EC2 User Guide,
//     "Instance state change events" (detail: instance-id, state);
//   - asg-instance-terminate-lifecycle-action.json: the "EC2
//     Instance-terminate Lifecycle Action" event of the Amazon EC2 Auto
//     Scaling User Guide, "Amazon EventBridge events for Amazon EC2 Auto
//     Scaling" (detail: LifecycleActionToken, AutoScalingGroupName,
//     LifecycleHookName, EC2InstanceId, LifecycleTransition, Origin,
//     Destination); its token is the documentation's, the same as in
//     aws-lambda-go's events/testdata/autoscaling-event-terminate-action.json;
//   - schedule-tick.json: the "Scheduled Event" of an EventBridge rate rule
//     (Amazon EventBridge User Guide, "Events from AWS services");
//   - apigw-v2-*.json: API Gateway HTTP API payload format 2.0 requests
//     (API Gateway Developer Guide, "Working with AWS Lambda proxy
//     integrations for HTTP APIs"), shaped like aws-lambda-go's
//     events/testdata/apigw-v2-request-*.json;
//   - sqs-submission-batch.json: an SQS batch as Lambda's event source
//     mapping delivers it (AWS Lambda Developer Guide, "Using Lambda with
//     Amazon SQS"), carrying fleetq submissions.
//
// pkg/service/interruption's tests parse every EC2 and Auto Scaling sample here.
package events

import "embed"

// FS holds every sample (*.json).
//
//go:embed *.json
var FS embed.FS
