package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// tokenPrefix marks (and versions) a worker token.
const tokenPrefix = "fqw1"

var b64 = base64.RawURLEncoding

// ErrMalformedToken is a bearer token that is not a fleetq worker token.
var ErrMalformedToken = errors.New("malformed worker token")

// WorkerToken is what a worker's bearer token says about itself. The fleet
// and worker id travel in the clear (they are not secrets) so each request
// can be checked with one conditional write instead of a lookup first.
type WorkerToken struct {
	Fleet    string
	WorkerID string
	// Hash is the hex SHA-256 of the whole token: the only form ever stored.
	Hash string
}

// NewWorkerToken mints a token for a worker: fqw1.<fleet>.<worker>.<secret>,
// the parts base64url-encoded, the secret 32 random bytes.
func NewWorkerToken(fleet, workerID string) (token string, parsed WorkerToken) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	token = strings.Join([]string{tokenPrefix, b64.EncodeToString([]byte(fleet)), b64.EncodeToString([]byte(workerID)), b64.EncodeToString(secret)}, ".")
	return token, WorkerToken{Fleet: fleet, WorkerID: workerID, Hash: HashToken(token)}
}

// ParseWorkerToken reads the fleet and worker id out of a token and digests it.
// It does not say whether the token is valid: the store compares the digest.
func ParseWorkerToken(token string) (WorkerToken, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 4 || parts[0] != tokenPrefix {
		return WorkerToken{}, ErrMalformedToken
	}
	fleet, err1 := b64.DecodeString(parts[1])
	worker, err2 := b64.DecodeString(parts[2])
	secret, err3 := b64.DecodeString(parts[3])
	if err1 != nil || err2 != nil || err3 != nil || len(fleet) == 0 || len(worker) == 0 || len(secret) != 32 {
		return WorkerToken{}, ErrMalformedToken
	}
	return WorkerToken{Fleet: string(fleet), WorkerID: string(worker), Hash: HashToken(token)}, nil
}

// HashToken is the stored form of a token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Equal compares a presented secret with the expected one in constant time.
// Both are digested first, so neither the content nor the length of the
// expected secret leaks through timing.
func Equal(presented, expected string) bool {
	a := sha256.Sum256([]byte(presented))
	b := sha256.Sum256([]byte(expected))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1 && expected != ""
}

// BearerToken extracts the token of an "Authorization: Bearer <token>" header.
func BearerToken(header string) (string, bool) {
	const p = "Bearer "
	if len(header) <= len(p) || !strings.EqualFold(header[:len(p)], p) {
		return "", false
	}
	t := strings.TrimSpace(header[len(p):])
	return t, t != ""
}

// RandomSecret returns n random bytes, base64url-encoded: for generated fleet
// secrets and operator tokens.
func RandomSecret(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return b64.EncodeToString(b)
}
