// Package eta answers, for each queued job of a fleet, when it is expected
// to start, the one thing it waits on, and its place in line.
//
// It is a forward projection from one Snapshot by the real rules, not a
// formula beside them: the queue in lease order (pkg/domain/lease, the
// planner's order with fair share and the tenants' max_leased caps), the
// running jobs' expected ends from their workflows' recent run times,
// booting instances ready after the fleet's recent boot times, and the
// scaler's next steps (scaling.Decide, or DecideLadder with an On-Demand
// rung, run on the projected state at each coming tick), within the
// fleet's max. When the start depends on something the fleet has no
// history of, or that no rule can time (a worker's approval, Spot's
// return), the estimate says so (a zero StartAt and a Basis naming why)
// rather than guessing.
//
// It is pure (no store, no clock): the store builds the Snapshot for the
// API, and the simulator builds it from its own state to measure the
// estimates against the actual lease times.
package eta
