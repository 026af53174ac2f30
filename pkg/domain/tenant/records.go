package tenant

import (
	"errors"
	"fmt"
	"time"
)

// APIKey is a tenant's API key as the store keeps it: never the key, only
// its SHA-256 (auth.APIKey).
type APIKey struct {
	ID     string `dynamodbav:"key_id"`
	Tenant string `dynamodbav:"tenant_id"`
	Name   string `dynamodbav:"name,omitempty"`
	Hash   string `dynamodbav:"key_hash"`
	// Times in Unix milliseconds; 0 is never.
	CreatedMS  int64 `dynamodbav:"created_ms"`
	ExpiresMS  int64 `dynamodbav:"expires_ms"`
	RevokedMS  int64 `dynamodbav:"revoked_ms"`
	LastUsedMS int64 `dynamodbav:"last_used_ms"`
}

// The states of an API key.
const (
	KeyActive  = "active"
	KeyRevoked = "revoked"
	KeyExpired = "expired"
)

// State is the key's state at now (the zero time is 0 ms, as the
// store writes it).
func (k APIKey) State(now time.Time) string {
	var nowMS int64
	if !now.IsZero() {
		nowMS = now.UnixMilli()
	}
	switch {
	case k.RevokedMS != 0:
		return KeyRevoked
	case k.ExpiresMS != 0 && nowMS >= k.ExpiresMS:
		return KeyExpired
	default:
		return KeyActive
	}
}

// KeyTouchInterval is how stale a key's last-used time may get: a busy key
// costs one write per interval, not one per request.
const KeyTouchInterval = time.Minute

// PrincipalMapping is an IAM principal an operator mapped, in the table, to
// one tenant or to the operators: who acts for whom changes without a
// deploy. The stage config's tenants[].principals and operators are read
// first.
type PrincipalMapping struct {
	// Key is Principal.Key of the ARN: two spellings of one role are one
	// item.
	Key string `dynamodbav:"principal_key"`
	// ARN is the role or user ARN as the operator wrote it.
	ARN string `dynamodbav:"principal_arn"`
	// Tenant is the tenant the principal acts for; "" for an operator.
	Tenant    string `dynamodbav:"tenant_id,omitempty"`
	Operator  bool   `dynamodbav:"operator,omitempty"`
	CreatedMS int64  `dynamodbav:"created_ms"`
	// CreatedBy names the operator who mapped it (an ARN, never a secret).
	CreatedBy string `dynamodbav:"created_by,omitempty"`
}

// Same reports whether two mappings say the same thing.
func (p PrincipalMapping) Same(o PrincipalMapping) bool {
	return p.Key == o.Key && p.Tenant == o.Tenant && p.Operator == o.Operator
}

// ErrPrincipalMapped is a principal the table already maps to another
// tenant (or to the operators): a principal acts for one only.
var ErrPrincipalMapped = errors.New("the principal is already mapped")

// PrincipalMappedError is ErrPrincipalMapped with the mapping that stands.
type PrincipalMappedError struct{ Existing PrincipalMapping }

// Error says what the principal is mapped to.
func (e *PrincipalMappedError) Error() string {
	if e.Existing.Operator {
		return fmt.Sprintf("principal %s already acts as an operator; remove it first", e.Existing.ARN)
	}
	return fmt.Sprintf("principal %s already acts for tenant %s; remove it first", e.Existing.ARN, e.Existing.Tenant)
}

// Unwrap makes errors.Is(err, ErrPrincipalMapped) hold.
func (e *PrincipalMappedError) Unwrap() error { return ErrPrincipalMapped }

// ErrOverQuota: the tenant already has as many open jobs as its cap allows.
var ErrOverQuota = errors.New("tenant is at its open-jobs cap")

// QuotaError is ErrOverQuota with the tenant, its cap and its count.
type QuotaError struct {
	Tenant string
	Cap    int
	Open   int
}

// Error says which tenant is at which cap.
func (e *QuotaError) Error() string {
	return fmt.Sprintf("tenant %q has %d open jobs, its cap (max_queued) is %d", e.Tenant, e.Open, e.Cap)
}

// Unwrap makes errors.Is(err, ErrOverQuota) hold.
func (e *QuotaError) Unwrap() error { return ErrOverQuota }
