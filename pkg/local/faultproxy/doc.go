// Package faultproxy is an HTTP proxy that sits between the real AWS SDK
// clients and an AWS-API endpoint and makes calls fail the ways AWS calls do:
// throttling, 500 and 503 answers, latency, and connections reset before the
// request reached the service or after it did (so the write may have
// happened). Tests and the local stack use it to prove that nothing is lost
// or done twice when the network and the services misbehave; the SDK and the
// code under test run unchanged.
package faultproxy
