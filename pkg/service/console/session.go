package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Token kinds: a login token travels once in the URL fleetq console opens;
// a session token is the cookie it is exchanged for.
const (
	kindLogin   = "login"
	kindSession = "session"
)

// claims is what a signed token says.
type claims struct {
	Kind     string `json:"k"`
	Operator string `json:"op"`
	Expires  int64  `json:"exp"`
	// Nonce makes every session distinct; its CSRF token is derived from it.
	Nonce string `json:"n"`
}

var errBadToken = errors.New("the console session is missing, forged or expired")

// deriveKey turns the stage's secret into the console's signing key, so a
// session signature can never be mistaken for anything else signed with it.
func deriveKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("fleetq console session v1"))
	return m.Sum(nil)
}

func sign(key []byte, c claims) string {
	payload, _ := json.Marshal(c)
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(mac(key, p))
}

func mac(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// verify checks a token's signature, kind and expiry.
func verify(key []byte, token, kind string, now time.Time) (claims, error) {
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return claims{}, errBadToken
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(key, p)) {
		return claims{}, errBadToken
	}
	payload, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return claims{}, errBadToken
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil || c.Kind != kind || c.Operator == "" || now.Unix() >= c.Expires {
		return claims{}, errBadToken
	}
	return c, nil
}

// csrfToken is the form token of a session: only pages served to that
// session carry it.
func csrfToken(key []byte, c claims) string {
	return base64.RawURLEncoding.EncodeToString(mac(key, "csrf|"+c.Nonce))
}

func nonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
