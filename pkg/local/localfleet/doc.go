// Package localfleet is the dev stack's stand-in for the fleets' Auto
// Scaling Groups: it keeps a desired capacity per fleet, launches
// instances that boot for a while and then run a worker (the real agent, in
// process), terminates the instances the scaler names, and can interrupt
// instances at random the way Spot does. It satisfies the same capacity
// interface the scaler drives in AWS (scaler.Capacity), and like an ASG with
// scale-in protection it never chooses a victim itself.
package localfleet
