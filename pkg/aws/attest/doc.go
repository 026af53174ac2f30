// Package attest proves which AWS instance a worker runs on without any
// secret stored on it, as HashiCorp Vault's aws auth method (iam) does: the
// agent signs an sts:GetCallerIdentity request with its instance profile's
// credentials (Sign) and sends the signed request; the API forwards it to
// STS, learns the role and the instance id from STS's answer, and checks
// them against the fleet's worker role and Auto Scaling groups (Verifier).
package attest
