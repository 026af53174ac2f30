// Package signing holds fleetq's signing keys. Each key serves one purpose
// (console sessions, webhook deliveries) and has an id derived from it; a
// Ring is a purpose's current key and, for a window after a rotation, the
// previous one. New signatures use the current key and name its id;
// verifiers look the named key up in the ring.
package signing
