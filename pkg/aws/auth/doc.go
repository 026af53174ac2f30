// Package auth holds fleetq's credentials: worker bearer tokens (256-bit
// random, shown once, stored only as a SHA-256 digest), the stage's fleet
// secret (the stack's Secrets Manager secret, or an SSM parameter; cached),
// and operator authentication (IAM at API Gateway in AWS, a bearer token
// elsewhere). Every comparison of a presented secret is constant-time.
package auth
