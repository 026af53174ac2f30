package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/service/webhook"
)

// How a receiver of the previous release (git commit 72ed7cb) verifies a
// delivery, as its docs/api.md told it and its webhook.Verify did: the key
// is the hex HMAC-SHA256 of "fleetq-webhook-signing-v1" under the stage's
// fleet secret; Fleetq-Signature must equal "v1=" and the hex HMAC-SHA256
// of "<Fleetq-Timestamp>.<body>" under that key, and the timestamp be
// within the tolerance. It knows no key id.
func previousReleaseKey(fleetSecret string) string {
	m := hmac.New(sha256.New, []byte(fleetSecret))
	m.Write([]byte("fleetq-webhook-signing-v1"))
	return hex.EncodeToString(m.Sum(nil))
}

func previousReleaseVerify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(h.Get("Fleetq-Timestamp"), 10, 64)
	if err != nil {
		return errors.New("no timestamp")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return errors.New("timestamp off")
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte("."))
	m.Write(body)
	if !hmac.Equal([]byte(h.Get("Fleetq-Signature")), []byte("v1="+hex.EncodeToString(m.Sum(nil)))) {
		return errors.New("signature does not verify")
	}
	return nil
}

// An upgrade from the previous release keeps its webhook key signing
// beside the new one for a window (the webhook key secret's "previous"
// until "previous_until", docs/deploy.md, "Upgrading a stage"): until the
// window ends, a receiver still verifying the previous release's way with
// the key derived from the old fleet secret accepts every delivery, and so
// does a receiver already given the new key alone; after it, only the new
// key signs.
func TestPreviousReleaseReceiverVerifiesDuringTheUpgradeWindow(t *testing.T) {
	t.Parallel()
	e := newHookEnv(t, webhook.Guard{AllowLoopback: true}, 5*time.Second, 3)
	srv, got := scripted(t, http.StatusOK, http.StatusOK)
	legacy := previousReleaseKey(fleetSecret)
	old, _ := signing.NewKey(legacy)
	cur, _ := signing.NewKey(webhookKey)
	e.keys.mu.Lock()
	e.keys.ring = signing.Ring{Current: cur, Previous: old, PreviousUntil: e.clk.Now().Add(14 * 24 * time.Hour)}
	e.keys.mu.Unlock()
	newReceiver := receiverKeys(t) // the new webhook key alone

	e.finish("in-window", srv.URL+"/h")
	e.clk.Advance(14*24*time.Hour - time.Minute)
	if n := e.deliver(); n != 1 {
		t.Fatalf("delivered %d", n)
	}
	r := got()[0]
	if err := previousReleaseVerify(legacy, r.header, r.body, e.clk.Now(), 5*time.Minute); err != nil {
		t.Errorf("a receiver of the previous release refuses a delivery within the window: %v (headers %v)", err, r.header)
	}
	if err := webhook.Verify(newReceiver, r.header, r.body, e.clk.Now(), 5*time.Minute); err != nil {
		t.Errorf("a receiver with the new key refuses a delivery within the window: %v (headers %v)", err, r.header)
	}

	e.clk.Advance(time.Minute)
	e.finish("after-window", srv.URL+"/h")
	if n := e.deliver(); n != 1 {
		t.Fatalf("delivered %d", n)
	}
	r = got()[1]
	if err := previousReleaseVerify(legacy, r.header, r.body, e.clk.Now(), 5*time.Minute); err == nil {
		t.Error("after the window, a delivery still verifies with the previous release's key")
	}
	if err := webhook.Verify(newReceiver, r.header, r.body, e.clk.Now(), 5*time.Minute); err != nil {
		t.Errorf("a receiver with the new key refuses a delivery after the window: %v", err)
	}
}
