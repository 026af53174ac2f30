// Package sim is a deterministic discrete-event simulator of a GPU fleet
// under a scaling policy: job arrivals, an Auto Scaling Group with boot
// delays, instances with slots, Spot interruptions with their two-minute
// warning, agents that lease, run and requeue work, and the control plane.
// The same seed gives the same numbers. fleetq's own policy runs through the
// production pkg/domain/scaling code; the baselines model the policies teams run
// today, each from its documented behaviour.
package sim
