// Package submission decodes and validates a job submission — the body of
// POST /api/jobs and of a message on the SQS submission queue, which are the
// same JSON — so the API and the dispatch function accept exactly the same
// submissions and reject the rest with the same messages. A rejected
// submission is kept for operators as a Rejection.
package submission
