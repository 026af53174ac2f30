// Package tenant holds the rules that make a tenant a boundary: what a
// tenant id may look like (one spelling per tenant, so a variant cannot
// escape another's caps), how a job id is scoped to its tenant, how an
// IAM caller's ARN names the principal the stage config maps to a tenant,
// and the records the API keeps of tenants: API keys (by digest),
// principals mapped to a tenant in the table, and the error of a tenant at
// its open-jobs cap.
package tenant
