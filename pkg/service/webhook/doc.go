// Package webhook posts a job's outcome to the producer's HTTPS endpoint,
// signed with HMAC-SHA256 so the receiver can tell it came from fleetq, and
// refuses endpoints inside the network fleetq runs in (loopback, private,
// link-local and cloud metadata addresses), so a subscription cannot be
// used to reach internal services. It is a publisher of the store's outbox:
// a delivery that fails leaves the events there for the next relay.
package webhook
