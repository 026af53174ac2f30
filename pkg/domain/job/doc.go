// Package job is the job lifecycle: its states, what each worker report or
// expiry turns a job into, and the limits on attempts, preemptions and
// history. It is pure (no I/O); pkg/aws/store applies these decisions with
// conditional writes so that concurrent actors cannot both win.
package job
