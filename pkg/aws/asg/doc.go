// Package asg adapts an EC2 Auto Scaling group to what the scaler needs: read
// a group's capacity and instances, set its desired capacity, terminate one
// chosen instance, complete a lifecycle action, and tell from the group's
// scaling activities since when its launches fail for lack of capacity.
//
// # Retries
//
// The adapter retries throttling (Throttling, ThrottlingException,
// RequestLimitExceeded), ResourceContention, 5xx answers and broken
// connections (reset before or after the service acted) itself, with
// exponential backoff and jitter, a bounded number of times; every other
// error is returned at once. Every call is safe to repeat: a desired
// capacity is a number set again, a repeated terminate finds the instance
// gone (done), a repeated lifecycle completion answers
// ErrNoActiveLifecycleAction, which the interruption handler takes as
// already completed, and a repeated heartbeat restarts the same timeout. It does so rather than lean on the SDK's
// standard retryer so that the policy is explicit, the waits go through an
// injectable Sleep (tests never sleep), and the bound is one number. Build
// the client with [WithoutSDKRetries] so the two do not multiply (the SDK's
// default of 3 attempts under this adapter's 6 would make 18 requests).
//
// # Launch time
//
// DescribeAutoScalingGroups does not report when an instance launched, and
// the adapter makes no extra EC2 call to find out: Instance.FirstSeen is
// always zero here. The scaler tracks boot time itself, from the first tick
// it sees an instance Pending.
package asg
