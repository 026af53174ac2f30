package scaling

import "fmt"

// Reasons of what applying the Spot pool's orders finds out of the
// machines and workers (pkg/service/scaler): EC2 stopped a pool instance
// on an interruption, or ran it again; a pool instance's workers were
// drained (a failed GPU health check, an operator) and hold no lease.

// ReasonPoolInterrupted is a pool instance EC2 stopped on a Spot
// interruption, or brought back.
const ReasonPoolInterrupted ReasonCode = "pool-interrupted"

// PoolInterruptedReason: EC2 stopped pool instance id on a Spot
// interruption; fleetq never starts it (EC2 does when capacity returns).
func PoolInterruptedReason(id string) Reason {
	return Reason{ReasonPoolInterrupted, fmt.Sprintf("pool instance %s stopped by EC2 on a Spot interruption: unavailable until EC2 starts it again", id)}
}

// PoolBackReason: EC2 ran interrupted pool instance id again.
func PoolBackReason(id string) Reason {
	return Reason{ReasonPoolInterrupted, fmt.Sprintf("pool instance %s running again: EC2 started it after its interruption", id)}
}

// PoolDrainedReason: every worker of pool instance id is drained and holds
// no lease; the instance is ended, as a drained group instance is
// terminated, and the refill replaces it.
func PoolDrainedReason(id string) Reason {
	return Reason{ReasonPoolEnd, fmt.Sprintf("pool end %s: its workers are drained and hold no lease; replaced", id)}
}
