// Package events holds sample events for every fleetq function, as the AWS
// service delivers them: API Gateway HTTP API (payload v2) requests, an SQS
// batch, the scheduler tick, and the EC2 and Auto Scaling events. Tests read
// them through FS; people can replay them by hand (POST /local/events in the
// dev stack, or `sam local invoke -e`).
//
// # Where each sample comes from
//
// Every sample follows the event shape AWS documents for it, with fleetq's
// own names (group fleetq-dev-demo, hook fleetq-drain, queue
// fleetq-dev-submit, instance i-0abc1234def567890 — the registration
// sample's worker runs on it, so replaying the EC2 samples drains that
// worker — dates in 2026) in place of the documentation's placeholders.
// pkg/service/system's TestLambdaWiring and TestDevStackWiring replay them
// end to end (a worker registers, leases the batch's job, is drained by the
// Spot warning, and the job is requeued), and infra's
// TestSQSSampleComesFromTheDispatchQueue checks the batch's queue is the
// dev stack's:
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
//     Amazon SQS"), carrying fleetq submissions;
//   - ec2-instance-state-change-stopping.json, -stopped.json: the same
//     state-change event with the states "stopping" and "stopped";
//   - ec2-capacity-reservation-interruption-warning.json: the "EC2
//     Capacity Reservation Instance Interruption Warning" event of the
//     Amazon EC2 User Guide, "Monitor interruptible Capacity Reservations
//     with EventBridge and CloudTrail" (detail: instance-id,
//     instance-action, instance-termination-time, azId);
//   - aws-health-scheduled-change.json: an "AWS Health Event" for EC2 in
//     the scheduledChange category (AWS Health User Guide, "Monitoring AWS
//     Health events with Amazon EventBridge"; detail: service,
//     eventTypeCode, eventTypeCategory, startTime, affectedEntities), with
//     the eventTypeCode AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED;
//   - asg-test-notification.json: the group's test notification, whose
//     fields (Event autoscaling:TEST_NOTIFICATION, AutoScalingGroupName,
//     AccountId, RequestId, Service, Time) the Amazon EC2 Auto Scaling User
//     Guide lists for the test message a new hook or notification sends,
//     carried as the detail of a terminate lifecycle action event, where
//     aws-node-termination-handler looks for it too
//     (pkg/monitor/sqsevent/asg-lifecycle-event.go, at commit 04929762).
//
// pkg/service/interruption's tests parse every EC2, Auto Scaling and AWS
// Health sample here.
//
// # The corpus of real events
//
// corpus/ holds events as others published them (a documentation sample's
// placeholders filled in, a test builder's random id and time fixed);
// corpus/README.md names the source (repository, path and commit, or
// documentation page) of each and what was filled in. The
// interruption handler's tests replay every one of them with its expected
// effect. Two are AWS Health scheduled changes that name no instance (a
// Dedicated Host's, and one without affected entities), derived from
// aws-node-termination-handler's sample as the README says: the handler
// logs them and answers with success.
package events

import "embed"

// FS holds every sample (*.json).
//
//go:embed *.json
var FS embed.FS

// Corpus holds the real events (corpus/*.json).
//
//go:embed corpus/*.json
var Corpus embed.FS
