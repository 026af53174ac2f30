// Package soak holds the soak test: the whole control plane (the dev stack's
// API, dispatch and store) driven over HTTP by hundreds of jobs and dozens
// of workers that crash, fail, requeue and get canceled at random, with
// faults injected on every DynamoDB and SQS call. It proves that nothing is
// lost and no job is ever leased to two workers at once; the package has no
// code of its own.
package soak
