// Package interruption handles the EC2, Auto Scaling and AWS Health events
// that end or threaten a fleet's instances, so that no interruption costs a
// job or an attempt even when the instance's agents cannot act (a hung box,
// a killed process). Every action applies to every worker of the instance
// (one per agent):
//
//   - Spot and Capacity Reservation interruption warnings: drained, leases
//     requeued at once (a preemption, no attempt spent);
//   - rebalance recommendations: counted only (the group's Capacity
//     Rebalance replaces the instance through the terminate hook);
//   - state changes: stopping drains and requeues; stopped, shutting-down
//     and terminated requeue and remove the workers;
//   - terminate lifecycle actions: drained, then held while running jobs
//     finish within the fleet's drain timeout; Sweep, run by the schedule's
//     tick, heartbeats held actions and completes each when its workers
//     are idle or its deadline passes (requeueing what is left);
//   - AWS Health scheduled changes: the affected instances drained ahead;
//   - the group's test notification: logged.
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
