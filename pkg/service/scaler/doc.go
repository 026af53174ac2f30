// Package scaler is the once-a-minute control loop of every fleet: it
// promotes due retries, expires queue deadlines, sweeps run-out leases,
// keeps worker records honest, asks the scaling policy (pkg/domain/scaling) for a
// decision, carries it out on the fleet's capacity, records it, and emits the
// fleet's metrics. It also holds the Waker dispatch uses to scale a fleet
// from zero the moment work arrives.
package scaler
