// Package webhook posts a job's outcome to the producer's endpoint, signed
// with HMAC-SHA256 so the receiver can tell it came from fleetq, and
// refuses endpoints inside the network fleetq runs in (loopback, private,
// link-local and cloud metadata addresses), so a callback URL cannot be
// used to reach internal services. The Deliverer sends each job's outcomes
// to its callback_url from the relay, outside any request, retrying with
// backoff and recording every attempt on the job.
package webhook
