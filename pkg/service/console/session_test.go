package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/signing"
)

// Only the console key signs a session: a token signed with any other key
// is refused, the fleet secret included (used as a key of its own, or as
// the key sessions were once derived from), and so is a session longer than
// the console allows, even signed with the right key.
func TestOnlyTheConsoleKeySignsSessions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	consoleKey, _ := signing.NewKey("the-console-key")
	ring := signing.Ring{Current: consoleKey}
	good := claims{Kind: kindSession, Operator: "arn:aws:iam::1:user/ops", Issued: now.Unix(), Expires: now.Add(time.Hour).Unix(), Nonce: "n1"}
	if _, err := verify(ring, sign(consoleKey, good), kindSession, now, time.Hour); err != nil {
		t.Fatalf("a session of the console key: %v", err)
	}

	fleetSecret, _ := signing.NewKey("the-fleet-secret")
	webhookKey, _ := signing.NewKey("the-webhook-key")
	derived := legacyDerivedKey("the-fleet-secret")
	yearLong := good
	yearLong.Expires = now.Add(365 * 24 * time.Hour).Unix()
	late := good
	late.Issued, late.Expires = now.Add(time.Hour).Unix(), now.Add(2*time.Hour).Unix()
	forged := map[string]string{
		"signed with the fleet secret":                  sign(fleetSecret, good),
		"signed with the webhook key":                   sign(webhookKey, good),
		"the fleet secret under the console key's id":   sign(signing.Key{ID: consoleKey.ID, Secret: fleetSecret.Secret}, good),
		"the old format, keyed from the fleet secret":   legacySign(derived, good),
		"the old format under the console key's id":     consoleKey.ID + "." + legacySign(derived, good),
		"a year-long session of the console key":        sign(consoleKey, yearLong),
		"a session issued in the future":                sign(consoleKey, late),
		"a login of the console key used as a session":  sign(consoleKey, claims{Kind: kindLogin, Operator: good.Operator, Issued: good.Issued, Expires: good.Expires, Nonce: "n2"}),
		"a session without an id":                       sign(consoleKey, claims{Kind: kindSession, Operator: good.Operator, Issued: good.Issued, Expires: good.Expires}),
		"a session of the console key with no key id":   sign(signing.Key{Secret: consoleKey.Secret}, good),
		"a session with its key id swapped for another": webhookKey.ID + sign(consoleKey, good)[len(consoleKey.ID):],
	}
	for name, tok := range forged {
		if _, err := verify(ring, tok, kindSession, now, time.Hour); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// legacyDerivedKey and legacySign are how sessions were signed before the
// console had a key of its own: HMAC of a label under the fleet secret, and
// "<payload>.<signature>".
func legacyDerivedKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("fleetq console session v1"))
	return m.Sum(nil)
}

func legacySign(key []byte, c claims) string {
	payload, _ := json.Marshal(c)
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(mac(key, p))
}
