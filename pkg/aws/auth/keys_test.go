package auth

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/fleetq/fleetq/pkg/aws/awsenv"
	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/lib/clock"
	"github.com/fleetq/fleetq/pkg/local/localaws"
)

// A key ring read through the real SDK client from the local Secrets
// Manager API: the current version signs, the previous one verifies for
// the window after the rotation, an unknown key id is looked up again (not
// more than once per MinRefresh), and the ring is otherwise kept for TTL.
func TestSecretsManagerKeysRotateWithOverlap(t *testing.T) {
	srv, err := localaws.StartJSONAPI("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ConsoleKey-AbCdEf"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv.PutSecretValueAt(arn, "key-one", t0)
	var calls atomic.Int64
	client := secretsmanager.NewFromConfig(awsenv.Static(""), func(o *secretsmanager.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.APIOptions = append(o.APIOptions, awsenv.CountRequests(&calls))
	})
	clk := clock.NewFake(t0.Add(time.Hour))
	src := &SecretsManagerKeys{Client: client, ID: arn, Window: time.Hour, TTL: 5 * time.Minute, Clock: clk}
	ctx := context.Background()
	one, two := signing.KeyID("key-one"), signing.KeyID("key-two")

	ring, err := src.SigningKeys(ctx, "")
	if err != nil || ring.Current.ID != one || ring.Previous.ID != "" {
		t.Fatalf("before any rotation: %+v, %v", ring, err)
	}
	// Rotated: a process that meets the new key id reads again at once.
	srv.PutSecretValueAt(arn, "key-two", clk.Now())
	rotatedAt := clk.Now()
	clk.Advance(11 * time.Second)
	ring, err = src.SigningKeys(ctx, two)
	if err != nil || ring.Current.ID != two || ring.Previous.ID != one || !ring.PreviousUntil.Equal(rotatedAt.Add(time.Hour)) {
		t.Fatalf("after the rotation: %+v, %v", ring, err)
	}
	if _, ok := ring.Find(one, clk.Now()); !ok {
		t.Fatal("the previous key does not verify within the window")
	}
	if _, ok := ring.Find(one, rotatedAt.Add(time.Hour)); ok {
		t.Fatal("the previous key verifies after the window")
	}
	// Unknown ids are looked up at most once per MinRefresh; known ones and
	// "" are answered from the ring within TTL.
	before := calls.Load()
	for range 5 {
		if _, err := src.SigningKeys(ctx, "0123456789abcdef"); err != nil {
			t.Fatal(err)
		}
		if _, err := src.SigningKeys(ctx, two); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load() - before; n != 0 {
		t.Fatalf("%d reads within MinRefresh of the last", n)
	}
	clk.Advance(10 * time.Second)
	if _, err := src.SigningKeys(ctx, "0123456789abcdef"); err != nil || calls.Load()-before != 2 {
		t.Fatalf("an unknown id after MinRefresh: %d reads (want 2: current and previous), %v", calls.Load()-before, err)
	}
	if _, err := (&SecretsManagerKeys{Client: client, ID: "nope", Clock: clk}).SigningKeys(ctx, ""); err == nil {
		t.Fatal("a missing secret answered a ring")
	}
}

// A key secret written as {"current", "previous", "previous_until"} keeps
// the previous key until the date it names (the upgrade that keeps the
// previous release's webhook key signing), never longer than MaxKeyWindow
// after the version was stored; a malformed one is an error, not a key.
func TestSecretsManagerKeysWithAnExplicitWindow(t *testing.T) {
	srv, err := localaws.StartJSONAPI("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:WebhookKey-AbCdEf"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	client := secretsmanager.NewFromConfig(awsenv.Static(""), func(o *secretsmanager.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	ctx := context.Background()
	read := func(value string) (signing.Ring, error) {
		srv.PutSecretValueAt(arn, value, t0)
		return (&SecretsManagerKeys{Client: client, ID: arn, Window: time.Hour, Clock: clock.NewFake(t0)}).SigningKeys(ctx, "")
	}
	ring, err := read(`{"current": "new-key", "previous": "legacy-key", "previous_until": "2026-01-15T00:00:00Z"}`)
	if err != nil || ring.Current.ID != signing.KeyID("new-key") || ring.Previous.ID != signing.KeyID("legacy-key") ||
		!ring.PreviousUntil.Equal(time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("ring %+v, %v", ring, err)
	}
	if ring, err = read(`{"current": "new-key", "previous": "legacy-key", "previous_until": "2027-01-01T00:00:00Z"}`); err != nil || !ring.PreviousUntil.Equal(t0.Add(MaxKeyWindow)) {
		t.Fatalf("a year's window: until %s (%v), want %s", ring.PreviousUntil, err, t0.Add(MaxKeyWindow))
	}
	if ring, err = read(`{"current": "new-key"}`); err != nil || ring.Current.ID != signing.KeyID("new-key") || ring.Previous.ID != "" {
		t.Fatalf("current alone: %+v, %v", ring, err)
	}
	for _, bad := range []string{`{"current": ""}`, `{"current": "k", "previous": "p"}`, `{"current": "k", "previous": "p", "previous_until": "soon"}`, `{"current": "k", "extra": 1}`} {
		if ring, err := read(bad); err == nil {
			t.Errorf("%s answered %+v", bad, ring)
		}
	}
}
