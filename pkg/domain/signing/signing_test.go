package signing

import (
	"testing"
	"time"
)

func TestRingFindsTheCurrentKeyAndThePreviousOneWithinItsWindow(t *testing.T) {
	cur, _ := NewKey("new-secret")
	prev, _ := NewKey("old-secret")
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := Ring{Current: cur, Previous: prev, PreviousUntil: at}
	if k, ok := r.Find(cur.ID, at.Add(time.Hour)); !ok || string(k.Secret) != "new-secret" {
		t.Fatalf("current key: %v %v", k, ok)
	}
	if k, ok := r.Find(prev.ID, at.Add(-time.Second)); !ok || string(k.Secret) != "old-secret" {
		t.Fatalf("previous key within the window: %v %v", k, ok)
	}
	if _, ok := r.Find(prev.ID, at); ok {
		t.Fatal("previous key found after its window")
	}
	for _, id := range []string{"", "0000000000000000"} {
		if _, ok := r.Find(id, at.Add(-time.Hour)); ok {
			t.Fatalf("key id %q found", id)
		}
	}
	if _, ok := (Ring{Current: cur}).Find("", at); ok {
		t.Fatal("an empty id matched a ring without a previous key")
	}
}

func TestKeyIDsAreStableAndDistinct(t *testing.T) {
	if KeyID("a") != KeyID("a") || KeyID("a") == KeyID("b") || len(KeyID("a")) != 16 {
		t.Fatalf("ids: %q %q", KeyID("a"), KeyID("b"))
	}
	// The documented definition, for receivers: hex SHA-256, first 16 digits.
	if got := KeyID("abc"); got != "ba7816bf8f01cfea" {
		t.Fatalf("KeyID(abc) = %s", got)
	}
	if a, b := Generate(), Generate(); a == b || len(a) != 64 {
		t.Fatalf("Generate: %q %q", a, b)
	}
	if _, err := NewKey(""); err == nil {
		t.Fatal("an empty key was accepted")
	}
}
