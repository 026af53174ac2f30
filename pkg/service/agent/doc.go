// Package agent is the worker agent every GPU machine runs (`fleetq
// worker`): it waits for its runner to be ready, registers with the fleet
// secret, polls for jobs up to its concurrency, heartbeats each, stops a
// job the moment it is canceled or its lease is lost, and reports the
// outcome. On a Spot interruption notice it requeues its running jobs
// (no attempt spent), deregisters and exits well inside the two minutes; on
// a rebalance recommendation it stops leasing and lets its jobs finish; on
// Drain (SIGTERM) it stops leasing, lets jobs finish within the drain
// timeout, requeues the rest and deregisters.
//
// The dev stack's local fleet runs this same code in process.
package agent
