// Package scaling is fleetq's scaling policy: from a fleet's job records
// (queued and leased work), its workers and its instances, it computes the
// desired capacity, the instances to terminate, and a one-line reason.
//
// It is pure: no AWS, no clock of its own (the caller passes Now). The
// scaler runs it once a minute per fleet, dispatch's wake-on-enqueue uses
// Need, and the simulator drives the very same Decide.
//
// The rules, in short:
//   - capacity follows work: ceil((ready + leased) / slots), clamped to the
//     fleet's min and max; instances booting (and launches the group has not
//     started yet) count as capacity on the way, so a tick never launches
//     twice for the same work;
//   - the fleet scales to its minimum only after no ready or leased job for
//     the idle window;
//   - it shrinks only by workers with no lease that have been idle past the
//     scale-in grace; never a worker with a lease, never an instance still
//     booting (until the boot timeout, after which an instance that never
//     registered is terminated as unhealthy);
//   - draining and unresponsive workers are not capacity; once they hold no
//     lease their instances are terminated.
package scaling
