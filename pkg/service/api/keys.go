package api

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/auth"
	"github.com/fleetq/fleetq/pkg/domain/fault"
	"github.com/fleetq/fleetq/pkg/domain/tenant"
	"github.com/fleetq/fleetq/pkg/domain/wire"
)

// KeyStore is what API keys need of the store.
type KeyStore interface {
	CreateAPIKey(ctx context.Context, k tenant.APIKey) error
	GetAPIKey(ctx context.Context, id string) (tenant.APIKey, error)
	ListAPIKeys(ctx context.Context, tenant string) ([]tenant.APIKey, error)
	RevokeAPIKey(ctx context.Context, id string) (tenant.APIKey, error)
	TouchAPIKey(ctx context.Context, id string, now time.Time) (bool, error)
}

// Limits of API keys.
const (
	maxKeyName     = 128
	maxKeyLifetime = 10 * 366 * 24 * time.Hour
)

func unauthenticated(msg string) *wire.Error {
	return &wire.Error{Status: http.StatusUnauthorized, Code: wire.CodeUnauthenticated, Message: msg}
}

// authenticateKey resolves an API key to its tenant: one strongly
// consistent read, a constant-time comparison of digests, and at most one
// write a minute for its last use. A malformed key costs no read.
func (s *server) authenticateKey(ctx context.Context, presented string) (caller, error) {
	parsed, err := auth.ParseAPIKey(presented)
	if err != nil {
		return caller{}, malformedKey()
	}
	k, err := s.Store.GetAPIKey(ctx, parsed.ID)
	if errors.Is(err, fault.ErrNotFound) {
		return caller{}, unauthenticated("the API key is not valid")
	}
	if err != nil {
		return caller{}, err
	}
	if !auth.Equal(parsed.Hash, k.Hash) {
		return caller{}, unauthenticated("the API key is not valid")
	}
	name := auth.APIKeyPrefix + k.ID
	now := s.Clock.Now()
	switch k.State(now) {
	case tenant.KeyRevoked:
		return caller{}, unauthenticated("the API key " + name + " was revoked; ask an operator for a new one")
	case tenant.KeyExpired:
		return caller{}, unauthenticated("the API key " + name + " has expired; ask an operator for a new one")
	}
	if now.Sub(time.UnixMilli(k.LastUsedMS)) >= tenant.KeyTouchInterval {
		if _, err := s.Store.TouchAPIKey(ctx, k.ID, now); err != nil {
			s.log.WarnContext(ctx, "record API key use", "key", name, "error", err.Error())
		}
	}
	return caller{tenant: k.Tenant, who: name}, nil
}

func viewKey(k tenant.APIKey, now time.Time) wire.APIKey {
	at := func(msec int64) *string {
		if msec == 0 {
			return nil
		}
		return rfc3339(time.UnixMilli(msec))
	}
	return wire.APIKey{KeyID: k.ID, Prefix: auth.APIKeyPrefix + k.ID, TenantID: k.Tenant, Name: k.Name, State: k.State(now),
		CreatedAt: at(k.CreatedMS), ExpiresAt: at(k.ExpiresMS), LastUsedAt: at(k.LastUsedMS), RevokedAt: at(k.RevokedMS)}
}

// createKey is POST /api/admin/keys: a new key for one tenant, shown once.
func (s *server) createKey(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateKeyRequest
	if err := readBody(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	key, k, err := s.newKey(r.Context(), operatorOf(r), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusCreated, wire.CreateKeyResponse{Key: key, APIKey: viewKey(k, s.Clock.Now())})
}

// newKey mints and stores a key; the console's form calls it too.
func (s *server) newKey(ctx context.Context, operator string, req wire.CreateKeyRequest) (string, tenant.APIKey, error) {
	if err := tenant.CheckID("tenant_id", req.TenantID); err != nil {
		return "", tenant.APIKey{}, invalid("%v", err)
	}
	if len(req.Name) > maxKeyName {
		return "", tenant.APIKey{}, invalid("field \"name\": at most %d characters", maxKeyName)
	}
	if req.ExpiresInSeconds < 0 || time.Duration(req.ExpiresInSeconds)*time.Second > maxKeyLifetime {
		return "", tenant.APIKey{}, invalid("field \"expires_in_seconds\": must be between 0 (never) and %d", int64(maxKeyLifetime/time.Second))
	}
	now := s.Clock.Now()
	key, parsed := auth.NewAPIKey()
	k := tenant.APIKey{ID: parsed.ID, Tenant: req.TenantID, Name: req.Name, Hash: parsed.Hash, CreatedMS: now.UnixMilli()}
	if req.ExpiresInSeconds > 0 {
		k.ExpiresMS = now.Add(time.Duration(req.ExpiresInSeconds) * time.Second).UnixMilli()
	}
	if err := s.Store.CreateAPIKey(ctx, k); err != nil {
		return "", tenant.APIKey{}, err
	}
	s.log.InfoContext(ctx, "API key created", "key", auth.APIKeyPrefix+k.ID, "tenant_id", k.Tenant, "operator", operator)
	return key, k, nil
}

// listKeys is GET /api/admin/keys?tenant=<id>.
func (s *server) listKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.tenantKeys(r.Context(), r.URL.Query().Get("tenant"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.KeysResponse{Keys: keys})
}

// tenantKeys lists one tenant's keys ("" for all), oldest first.
func (s *server) tenantKeys(ctx context.Context, t string) ([]wire.APIKey, error) {
	if t != "" {
		if err := tenant.CheckID("tenant", t); err != nil {
			return nil, invalid("query %v", err)
		}
	}
	ks, err := s.Store.ListAPIKeys(ctx, t)
	if err != nil {
		return nil, err
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].CreatedMS != ks[j].CreatedMS {
			return ks[i].CreatedMS < ks[j].CreatedMS
		}
		return ks[i].ID < ks[j].ID
	})
	now := s.Clock.Now()
	out := make([]wire.APIKey, 0, len(ks))
	for _, k := range ks {
		out = append(out, viewKey(k, now))
	}
	return out, nil
}

// revokeKey is POST /api/admin/keys/{key_id}/revoke.
func (s *server) revokeKey(w http.ResponseWriter, r *http.Request) {
	var req wire.Empty
	if err := readBody(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	k, err := s.revokeKeyID(r.Context(), operatorOf(r), r.PathValue("key_id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.KeyResponse{APIKey: viewKey(k, s.Clock.Now())})
}

func (s *server) revokeKeyID(ctx context.Context, operator, id string) (tenant.APIKey, error) {
	if !auth.ValidAPIKeyID(id) {
		return tenant.APIKey{}, notFound("API key %q: not found", id)
	}
	k, err := s.Store.RevokeAPIKey(ctx, id)
	if err != nil {
		return tenant.APIKey{}, err
	}
	s.log.InfoContext(ctx, "API key revoked", "key", auth.APIKeyPrefix+k.ID, "tenant_id", k.Tenant, "operator", operator)
	return k, nil
}
