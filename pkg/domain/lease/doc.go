// Package lease is the rule that decides which job a polling worker tries
// first: the candidates it may lease (workflows it serves, jobs pinned to
// On-Demand only for On-Demand workers), highest priority first, then
// oldest; within the top priority the tenants' fair share when the stage
// lists tenants, spread at random over the head so concurrent pollers try
// different jobs, and pinned jobs first for an On-Demand worker.
//
// It is pure (no store, no clock): the store reads the candidates, the
// census and the worker and claims in the order it answers; the simulator
// leases by the same rule.
package lease
