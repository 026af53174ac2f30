// Package interruption handles the EC2 and Auto Scaling events that end or
// threaten a fleet's instances, so that no interruption costs a job or an
// attempt even when the instance's agent cannot act (a hung box, a killed
// process):
//
//   - EC2 Spot Instance Interruption Warning: the worker is drained and its
//     leases are requeued at once (a preemption, no attempt spent);
//   - EC2 Instance Rebalance Recommendation: the worker is drained (no new
//     leases); its running jobs go on;
//   - EC2 Instance State-change Notification (shutting-down, terminated):
//     its leases are requeued and the worker removed;
//   - EC2 Instance-terminate Lifecycle Action: drained, leases requeued,
//     then the lifecycle action is completed with CONTINUE.
//
// Each detail type has its own small parser (Parse) into a typed Message;
// a table maps the message's Kind to its action; Handle is parse, look up,
// run. An event of another detail type, or with a detail that cannot be
// read, is refused with an error before anything changes.
//
// Every step is idempotent and safe under duplicate or out-of-order
// delivery; a race with the agent's own requeue is settled by the lease
// token (one of them moves the job, the other finds the lease gone). An
// event for an instance no worker runs on is a logged no-op.
package interruption
