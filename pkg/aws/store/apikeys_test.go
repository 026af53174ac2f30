package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fleetq/fleetq/pkg/aws/store"
)

func TestAPIKeysAreCreatedListedRevokedAndTouched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.clock.Now()
	keys := []store.APIKey{
		{ID: "aaaaaaaaaaaaaaaa", Tenant: "acme", Name: "ci", Hash: "h1", CreatedMS: now.UnixMilli()},
		{ID: "bbbbbbbbbbbbbbbb", Tenant: "acme", Hash: "h2", CreatedMS: now.UnixMilli(), ExpiresMS: now.Add(time.Hour).UnixMilli()},
		{ID: "cccccccccccccccc", Tenant: "globex", Hash: "h3", CreatedMS: now.UnixMilli()},
	}
	for _, k := range keys {
		if err := e.st.CreateAPIKey(e.ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.CreateAPIKey(e.ctx, store.APIKey{ID: "aaaaaaaaaaaaaaaa", Tenant: "globex", Hash: "x"}); !errors.Is(err, store.ErrKeyExists) {
		t.Fatalf("a second key with a taken id: %v", err)
	}
	if k, err := e.st.GetAPIKey(e.ctx, "aaaaaaaaaaaaaaaa"); err != nil || k != keys[0] {
		t.Fatalf("GetAPIKey = %+v, %v; want the first key unchanged", k, err)
	}
	if _, err := e.st.GetAPIKey(e.ctx, "zzzzzzzzzzzzzzzz"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	acme, err := e.st.ListAPIKeys(e.ctx, "acme")
	if err != nil || len(acme) != 2 || acme[0].Tenant != "acme" || acme[1].Tenant != "acme" {
		t.Fatalf("acme's keys = %+v, %v", acme, err)
	}
	if all, err := e.st.ListAPIKeys(e.ctx, ""); err != nil || len(all) != 3 {
		t.Fatalf("all keys = %+v, %v", all, err)
	}

	if got := keys[1].State(now); got != store.KeyActive {
		t.Fatalf("state before expiry = %s", got)
	}
	if got := keys[1].State(now.Add(time.Hour)); got != store.KeyExpired {
		t.Fatalf("state at expiry = %s", got)
	}
	e.clock.Advance(time.Second)
	k, err := e.st.RevokeAPIKey(e.ctx, "aaaaaaaaaaaaaaaa")
	if err != nil || k.State(e.clock.Now()) != store.KeyRevoked || k.RevokedMS != e.clock.Now().UnixMilli() {
		t.Fatalf("revoke = %+v, %v", k, err)
	}
	e.clock.Advance(time.Second)
	if again, err := e.st.RevokeAPIKey(e.ctx, "aaaaaaaaaaaaaaaa"); err != nil || again.RevokedMS != k.RevokedMS {
		t.Fatalf("revoking again = %+v, %v; want the first revocation kept", again, err)
	}
	if _, err := e.st.RevokeAPIKey(e.ctx, "zzzzzzzzzzzzzzzz"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke an unknown key: %v", err)
	}

	// Uses are recorded at most once per KeyTouchInterval.
	id := "cccccccccccccccc"
	for i, want := range []bool{true, false, false} {
		wrote, err := e.st.TouchAPIKey(e.ctx, id, e.clock.Now())
		if err != nil || wrote != want {
			t.Fatalf("touch %d = %v, %v; want %v", i, wrote, err, want)
		}
		e.clock.Advance(20 * time.Second)
	}
	wrote, err := e.st.TouchAPIKey(e.ctx, id, e.clock.Now())
	if err != nil || !wrote {
		t.Fatalf("touch a minute on = %v, %v", wrote, err)
	}
	if k, _ := e.st.GetAPIKey(e.ctx, id); k.LastUsedMS != e.clock.Now().UnixMilli() {
		t.Fatalf("last used %d, want %d", k.LastUsedMS, e.clock.Now().UnixMilli())
	}
	if wrote, err := e.st.TouchAPIKey(e.ctx, "zzzzzzzzzzzzzzzz", e.clock.Now()); err != nil || wrote {
		t.Fatalf("touching an unknown key = %v, %v; it must create nothing", wrote, err)
	}
	if _, err := e.st.GetAPIKey(e.ctx, "zzzzzzzzzzzzzzzz"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("a touch created a key")
	}
}
