// Package awsenv builds the AWS SDK configuration fleetq's binaries use. In
// Lambda it is the default chain; FLEETQ_*_ENDPOINT variables point a client
// at DynamoDB Local, LocalStack, the embedded dev servers or any other
// endpoint speaking the same wire protocol, with nothing else changed.
package awsenv
