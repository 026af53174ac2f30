package wire

// Paths of the operator routes that manage tenants' API keys.
const (
	PathAdminKeys      = "/api/admin/keys"
	PathAdminKeyRevoke = "/api/admin/keys/{key_id}/revoke"
)

// CreateKeyRequest is the body of POST /api/admin/keys.
type CreateKeyRequest struct {
	// TenantID is the tenant the key acts for.
	TenantID string `json:"tenant_id"`
	// Name says what the key is for (at most 128 characters, optional).
	Name string `json:"name,omitempty"`
	// ExpiresInSeconds makes the key expire that long after its creation
	// (0: never).
	ExpiresInSeconds int64 `json:"expires_in_seconds,omitempty"`
}

// APIKey describes a tenant's API key; the key itself is shown only once,
// in CreateKeyResponse.
type APIKey struct {
	// KeyID is the key's public id; Prefix (fqk1.<key_id>) is how logs and
	// listings name it, and how the key begins.
	KeyID    string `json:"key_id"`
	Prefix   string `json:"prefix"`
	TenantID string `json:"tenant_id"`
	Name     string `json:"name"`
	// State is active, revoked or expired.
	State      string  `json:"state"`
	CreatedAt  *string `json:"created_at"`
	ExpiresAt  *string `json:"expires_at"`
	LastUsedAt *string `json:"last_used_at"`
	RevokedAt  *string `json:"revoked_at"`
}

// CreateKeyResponse is the 201 answer of POST /api/admin/keys.
type CreateKeyResponse struct {
	// Key is the API key, shown only here: fleetq keeps its SHA-256.
	Key    string `json:"key"`
	APIKey APIKey `json:"api_key"`
}

// KeysResponse is the 200 answer of GET /api/admin/keys.
type KeysResponse struct {
	Keys []APIKey `json:"keys"`
}

// KeyResponse is the 200 answer of POST /api/admin/keys/{key_id}/revoke.
type KeyResponse struct {
	APIKey APIKey `json:"api_key"`
}
