package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/fleetq/fleetq/pkg/domain/signing"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// SecretsManagerKeys reads a signing key ring from a Secrets Manager secret
// the stack generated (one secret per purpose: console sessions, webhook
// deliveries). Its AWSCURRENT version is the current key; its AWSPREVIOUS
// version, which Secrets Manager keeps when put-secret-value stores a new
// one, still verifies for Window after the current version was created.
// The ring is kept for TTL; a key id the ring does not know makes it read
// again, at most once per MinRefresh, so a key rotated a moment ago is
// learned at once without letting unknown ids flood Secrets Manager.
type SecretsManagerKeys struct {
	Client SecretsManagerGetter
	ID     string
	// Window is how long the previous key verifies after a rotation.
	Window time.Duration
	// TTL is how long the ring is kept (default 5m); MinRefresh the least
	// time between reads for an unknown key id (default 10s).
	TTL        time.Duration
	MinRefresh time.Duration
	Clock      clock.Clock

	mu     sync.Mutex
	ring   signing.Ring
	readAt time.Time
}

// SigningKeys returns the ring, read again when stale or when kid is a key
// id it does not hold.
func (s *SecretsManagerKeys) SigningKeys(ctx context.Context, kid string) (signing.Ring, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := clockOr(s.Clock).Now()
	age := now.Sub(s.readAt)
	if s.ring.Current.ID != "" && age >= 0 && age < ttlOr(s.TTL) {
		_, known := s.ring.Find(kid, now)
		minRefresh := s.MinRefresh
		if minRefresh <= 0 {
			minRefresh = 10 * time.Second
		}
		if kid == "" || known || age < minRefresh {
			return s.ring, nil
		}
	}
	ring, err := s.read(ctx)
	if err != nil {
		return signing.Ring{}, err
	}
	s.ring, s.readAt = ring, now
	return ring, nil
}

// read reads the current and previous versions.
func (s *SecretsManagerKeys) read(ctx context.Context) (signing.Ring, error) {
	cur, err := s.Client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.ID)})
	if err != nil {
		return signing.Ring{}, fmt.Errorf("read signing key %s: %w", s.ID, err)
	}
	if v := strings.TrimSpace(aws.ToString(cur.SecretString)); strings.HasPrefix(v, "{") {
		ring, err := ParseKeyRing(v)
		if err != nil {
			return signing.Ring{}, fmt.Errorf("signing key %s: %w", s.ID, err)
		}
		if cur.CreatedDate != nil && ring.PreviousUntil.After(cur.CreatedDate.Add(MaxKeyWindow)) {
			ring.PreviousUntil = cur.CreatedDate.Add(MaxKeyWindow)
		}
		return ring, nil
	}
	var ring signing.Ring
	if ring.Current, err = signing.NewKey(aws.ToString(cur.SecretString)); err != nil {
		return signing.Ring{}, fmt.Errorf("signing key %s: %w", s.ID, err)
	}
	prev, err := s.Client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(s.ID), VersionStage: aws.String("AWSPREVIOUS")})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return ring, nil // never rotated
	case err != nil:
		return signing.Ring{}, fmt.Errorf("read previous signing key %s: %w", s.ID, err)
	}
	if k, err := signing.NewKey(aws.ToString(prev.SecretString)); err == nil && cur.CreatedDate != nil {
		ring.Previous, ring.PreviousUntil = k, cur.CreatedDate.Add(s.Window)
	}
	return ring, nil
}

// MaxKeyWindow bounds how long a previous key given as "previous" still
// signs and verifies after the secret's version was stored.
const MaxKeyWindow = 30 * 24 * time.Hour

// ParseKeyRing reads a signing key secret written as
// {"current": "<key>", "previous": "<key>", "previous_until": "<RFC 3339>"}:
// a rotation whose window the operator sets (up to MaxKeyWindow), such as
// the upgrade that keeps the previous release's webhook key signing beside
// the new one until its receivers have moved (docs/deploy.md, "Upgrading a
// stage"). The previous key and its end go together.
func ParseKeyRing(value string) (signing.Ring, error) {
	var r struct {
		Current       string `json:"current"`
		Previous      string `json:"previous"`
		PreviousUntil string `json:"previous_until"`
	}
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return signing.Ring{}, fmt.Errorf("neither a plain key nor {\"current\", \"previous\", \"previous_until\"}: %v", err)
	}
	var ring signing.Ring
	var err error
	if ring.Current, err = signing.NewKey(r.Current); err != nil {
		return signing.Ring{}, fmt.Errorf("\"current\": %w", err)
	}
	if r.Previous == "" && r.PreviousUntil == "" {
		return ring, nil
	}
	if r.Previous == "" || r.PreviousUntil == "" {
		return signing.Ring{}, errors.New("\"previous\" and \"previous_until\" go together")
	}
	until, err := time.Parse(time.RFC3339, r.PreviousUntil)
	if err != nil {
		return signing.Ring{}, fmt.Errorf("\"previous_until\" is not an RFC 3339 time: %v", err)
	}
	ring.Previous, _ = signing.NewKey(r.Previous)
	ring.PreviousUntil = until
	return ring, nil
}
