// Package tenant holds the rules that make a tenant a boundary: what a
// tenant id may look like (one spelling per tenant, so a variant cannot
// escape another's caps), how a job id is scoped to its tenant, and how an
// IAM caller's ARN names the principal the stage config maps to a tenant.
package tenant
