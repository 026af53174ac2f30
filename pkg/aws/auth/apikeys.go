package auth

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
)

// APIKeyPrefix begins (and versions) every API key.
const APIKeyPrefix = "fqk1."

// ErrMalformedAPIKey is a bearer credential that is not a fleetq API key.
var ErrMalformedAPIKey = errors.New("malformed API key")

var keyIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// APIKey is what a tenant's API key says about itself: its public id, which
// names the key in listings and logs, and the digest that is its only
// stored form.
type APIKey struct {
	// ID is public: 80 random bits in lowercase base32.
	ID string
	// Hash is the hex SHA-256 of the whole key. A plain digest is enough
	// because the key holds 256 random bits: there is nothing to guess, so
	// a slow password hash would only make every request cost more.
	Hash string
}

// NewAPIKey mints a key: fqk1.<id>.<secret>, the id 10 random bytes in
// base32, the secret 32 random bytes in base64url.
func NewAPIKey() (key string, parsed APIKey) {
	id := make([]byte, 10)
	secret := make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	if _, err := rand.Read(secret); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	key = APIKeyPrefix + keyIDEncoding.EncodeToString(id) + "." + b64.EncodeToString(secret)
	return key, APIKey{ID: keyIDEncoding.EncodeToString(id), Hash: HashToken(key)}
}

// ParseAPIKey reads a key's id and digests it. It does not say whether the
// key is valid: the caller compares the digest with the stored one.
func ParseAPIKey(key string) (APIKey, error) {
	rest, ok := strings.CutPrefix(key, APIKeyPrefix)
	if !ok {
		return APIKey{}, ErrMalformedAPIKey
	}
	id, secret, ok := strings.Cut(rest, ".")
	if !ok || !ValidAPIKeyID(id) {
		return APIKey{}, ErrMalformedAPIKey
	}
	if raw, err := b64.DecodeString(secret); err != nil || len(raw) != 32 {
		return APIKey{}, ErrMalformedAPIKey
	}
	return APIKey{ID: id, Hash: HashToken(key)}, nil
}

// ValidAPIKeyID reports whether id could be an API key's public id.
func ValidAPIKeyID(id string) bool {
	raw, err := keyIDEncoding.DecodeString(id)
	return err == nil && len(raw) == 10 && len(id) == 16
}
