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

	"github.com/fleetq/fleetq/pkg/domain/signing"
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
	Issued   int64  `json:"iat"`
	Expires  int64  `json:"exp"`
	// Nonce is the login's one-time id, or the session's id; a session's
	// CSRF token is derived from it.
	Nonce string `json:"n"`
	// Epoch is the operator's session epoch when the token was signed:
	// "sign out everywhere" raises it, ending every token signed before.
	Epoch int64 `json:"ep"`
}

// session is a verified session token and the key that signed it.
type session struct {
	claims
	key signing.Key
}

var errBadToken = errors.New("the console session is missing, forged or expired")

// macLabel separates console signatures from anything else a key might
// ever sign.
const macLabel = "fleetq console v2|"

// sign returns "<key id>.<payload>.<signature>": the signature names its key.
func sign(key signing.Key, c claims) string {
	payload, _ := json.Marshal(c)
	p := key.ID + "." + base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(mac(key.Secret, macLabel+p))
}

func mac(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// keyIDOf is the key id a token names ("" for no token).
func keyIDOf(token string) string {
	id, _, _ := strings.Cut(token, ".")
	return id
}

// clockSkew is how far ahead of this process's clock another API process
// may have issued a token (seconds).
const clockSkew = 60

// verify checks a token's key, signature, kind and times: a token is valid
// from when it was issued until it expires, and never for longer than
// maxTTL, whatever it says.
func verify(ring signing.Ring, token, kind string, now time.Time, maxTTL time.Duration) (session, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return session{}, errBadToken
	}
	key, ok := ring.Find(parts[0], now)
	if !ok {
		return session{}, errBadToken
	}
	got, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(got, mac(key.Secret, macLabel+parts[0]+"."+parts[1])) {
		return session{}, errBadToken
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return session{}, errBadToken
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil || c.Kind != kind || c.Operator == "" || c.Nonce == "" {
		return session{}, errBadToken
	}
	if n := now.Unix(); n >= c.Expires || n < c.Issued-clockSkew || c.Expires-c.Issued > int64(maxTTL/time.Second) {
		return session{}, errBadToken
	}
	return session{claims: c, key: key}, nil
}

// csrfToken is the form token of a session: only pages served to that
// session carry it.
func csrfToken(s session) string {
	return base64.RawURLEncoding.EncodeToString(mac(s.key.Secret, macLabel+"csrf|"+s.Nonce))
}

func nonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
