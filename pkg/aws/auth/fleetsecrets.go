package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// A fleet's secret registers workers outside AWS (and on the dev stack)
// into that fleet only; fleets in AWS register by attestation and need
// none. Its stored value is the secret itself, or, during a rotation,
// {"current": "<new>", "previous": "<old>"}: both are accepted until the
// previous one is removed.

// ParseFleetSecret reads a fleet secret's stored value into the secrets it
// accepts: the current one first.
func ParseFleetSecret(value string) ([]string, error) {
	v := strings.TrimSpace(value)
	if !strings.HasPrefix(v, "{") {
		if v == "" {
			return nil, fmt.Errorf("the fleet secret is empty")
		}
		return []string{v}, nil
	}
	var r struct {
		Current  string `json:"current"`
		Previous string `json:"previous"`
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("the fleet secret is neither a plain secret nor {\"current\", \"previous\"}: %v", err)
	}
	if r.Current == "" {
		return nil, fmt.Errorf("the fleet secret has no \"current\" value")
	}
	if r.Previous == "" || r.Previous == r.Current {
		return []string{r.Current}, nil
	}
	return []string{r.Current, r.Previous}, nil
}

// EqualAny reports whether presented is one of the accepted secrets,
// comparing with every one in constant time.
func EqualAny(presented string, accepted []string) bool {
	ok := false
	for _, a := range accepted {
		if Equal(presented, a) {
			ok = true
		}
	}
	return ok
}

// StaticFleetSecrets are the fleets' secrets given in process (the dev
// stack): by fleet slug, the current secret first.
type StaticFleetSecrets map[string][]string

// FleetSecrets returns the secrets fleet accepts (none: it takes no secret).
func (s StaticFleetSecrets) FleetSecrets(_ context.Context, fleet string) ([]string, error) {
	return s[fleet], nil
}

// SecretsManagerFleetSecrets reads each fleet's secret from its Secrets
// Manager secret (by ARN, as the stack creates one per fleet that accepts
// a secret) and keeps it for TTL, as SecretsManagerSecret does.
type SecretsManagerFleetSecrets struct {
	Client SecretsManagerGetter
	// ARNs are the fleets' secrets by slug; a fleet not listed takes none.
	ARNs  map[string]string
	TTL   time.Duration
	Clock clock.Clock

	mu    sync.Mutex
	cache map[string]cachedSecrets
}

type cachedSecrets struct {
	values  []string
	fetched time.Time
}

// FleetSecrets returns the secrets fleet accepts, reading Secrets Manager
// when the cache is stale.
func (s *SecretsManagerFleetSecrets) FleetSecrets(ctx context.Context, fleet string) ([]string, error) {
	arn, ok := s.ARNs[fleet]
	if !ok {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := clockOr(s.Clock).Now()
	if c, ok := s.cache[fleet]; ok && now.Sub(c.fetched) < ttlOr(s.TTL) {
		return c.values, nil
	}
	out, err := s.Client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return nil, fmt.Errorf("read fleet %s's secret %s: %w", fleet, arn, err)
	}
	values, err := ParseFleetSecret(aws.ToString(out.SecretString))
	if err != nil {
		return nil, fmt.Errorf("fleet %s's secret %s: %w", fleet, arn, err)
	}
	if s.cache == nil {
		s.cache = map[string]cachedSecrets{}
	}
	s.cache[fleet] = cachedSecrets{values: values, fetched: now}
	return values, nil
}
