package wire

// Paths of the operator routes that map IAM principals to tenants.
const (
	PathAdminPrincipals      = "/api/admin/principals"
	PathAdminPrincipalRemove = "/api/admin/principals/remove"
)

// MapPrincipalRequest is the body of POST /api/admin/principals: the IAM
// role or user that acts for one tenant on the producer routes, or (with
// operator) as an operator.
type MapPrincipalRequest struct {
	// PrincipalARN is an IAM role or user ARN
	// (arn:aws:iam::ACCOUNT:role/NAME); a session of an assumed role is
	// its role.
	PrincipalARN string `json:"principal_arn"`
	// TenantID is the tenant it acts for; empty with operator.
	TenantID string `json:"tenant_id,omitempty"`
	// Operator makes it act as an operator on the producer routes (every
	// tenant).
	Operator bool `json:"operator,omitempty"`
}

// RemovePrincipalRequest is the body of POST /api/admin/principals/remove.
type RemovePrincipalRequest struct {
	PrincipalARN string `json:"principal_arn"`
}

// PrincipalMapping is who an IAM principal acts for.
type PrincipalMapping struct {
	// PrincipalARN is the ARN as it was given.
	PrincipalARN string `json:"principal_arn"`
	// TenantID is the tenant it acts for; "" for an operator.
	TenantID string `json:"tenant_id"`
	Operator bool   `json:"operator"`
	// Source is "table" (mapped through this API, changed without a
	// deploy) or "config" (the stage config; changed by a deploy).
	Source    string  `json:"source"`
	CreatedAt *string `json:"created_at"`
}

// PrincipalResponse is the answer of POST /api/admin/principals and
// POST /api/admin/principals/remove.
type PrincipalResponse struct {
	Principal PrincipalMapping `json:"principal"`
}

// PrincipalsResponse is the 200 answer of GET /api/admin/principals.
type PrincipalsResponse struct {
	Principals []PrincipalMapping `json:"principals"`
}
