// Package devstack is `fleetq dev`: the whole control plane on one machine.
// It runs embedded DynamoDB-API and SQS-API servers on loopback (or uses the
// endpoints in FLEETQ_DYNAMODB_ENDPOINT / FLEETQ_SQS_ENDPOINT), creates the
// table and queues, serves the HTTP API, and feeds the dispatch handler from
// the submission queue the way Lambda's event source mapping would. Every
// component is the production code; only the triggers are local.
package devstack
