package signing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// Key is one signing key: the secret and its id.
type Key struct {
	// ID names the key in signatures: the first 16 hex digits of the
	// SHA-256 of the secret, so whoever holds a key can compute its id.
	ID     string
	Secret []byte
}

// NewKey returns the key of a secret (a Secrets Manager secret's string, or
// Generate's). An empty secret is no key.
func NewKey(secret string) (Key, error) {
	if secret == "" {
		return Key{}, errors.New("a signing key cannot be empty")
	}
	return Key{ID: KeyID(secret), Secret: []byte(secret)}, nil
}

// KeyID is the id of a secret: the first 16 hex digits of its SHA-256.
func KeyID(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:8])
}

// Generate returns a new random secret: 32 bytes from crypto/rand, as 64
// hex digits.
func Generate() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics on a broken source)
	return hex.EncodeToString(b)
}

// Ring is one purpose's keys: the current key signs; the previous one, if
// any, still verifies until PreviousUntil (the rotation window), so what was
// signed just before a rotation stays valid while every process learns the
// new key.
type Ring struct {
	Current       Key
	Previous      Key
	PreviousUntil time.Time
}

// Find returns the key named id that verifies at now: the current key, or
// the previous one within the rotation window.
func (r Ring) Find(id string, now time.Time) (Key, bool) {
	switch {
	case id == "":
		return Key{}, false
	case id == r.Current.ID:
		return r.Current, true
	case id == r.Previous.ID && now.Before(r.PreviousUntil):
		return r.Previous, true
	}
	return Key{}, false
}

// Signers are the keys that sign at now: the previous key first while its
// rotation window runs, so what only holds it (a receiver not yet given the
// new key, or one set up by a release that knew no other) still verifies
// the first signature, then the current key.
func (r Ring) Signers(now time.Time) []Key {
	if r.Previous.ID != "" && r.Previous.ID != r.Current.ID && now.Before(r.PreviousUntil) {
		return []Key{r.Previous, r.Current}
	}
	return []Key{r.Current}
}

// Static is a ring fixed for the process's life (the dev stack's generated
// keys, tests); it satisfies the Source interfaces of the packages that sign.
type Static Ring

// SigningKeys returns the ring.
func (s Static) SigningKeys(context.Context, string) (Ring, error) {
	if s.Current.ID == "" {
		return Ring{}, errors.New("no signing key")
	}
	return Ring(s), nil
}

// NewStatic returns the ring of one current key from secret.
func NewStatic(secret string) (Static, error) {
	k, err := NewKey(secret)
	return Static{Current: k}, err
}
