// Package dispatch turns submissions on the SQS submission queue into jobs.
// SQS delivers at least once, so creation is idempotent by job id; the batch
// answer lists only the records that failed for a reason that may pass
// (batchItemFailures), so one bad record never redelivers its neighbours; and
// a record that can never succeed (malformed, unknown workflow) is recorded
// for operators and acknowledged instead of being retried forever.
package dispatch
