// Package localaws runs AWS-compatible servers in-process on loopback, for the
// local dev stack and the integration tests: DynamoDB's JSON API
// (github.com/truora/minidyn) and SQS's JSON API (github.com/Admiral-Piett/goaws),
// plus its own server for the part of the EC2 Auto Scaling Query API fleetq
// uses (autoscaling.go). Code under test reaches them through the real
// aws-sdk-go-v2 clients, so the wire protocol is exercised end to end.
package localaws
