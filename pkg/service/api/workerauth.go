package api

import (
	"context"
	"sync"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/worker"
	"github.com/fleetq/fleetq/pkg/lib/clock"
)

// Authorizer checks a worker token's digest against the stored one.
type Authorizer interface {
	Authorize(ctx context.Context, a worker.Auth) (worker.Worker, error)
}

// Worker tokens this API process has checked recently are remembered so a
// worker's steady traffic does not pay a read before every request.
const (
	// checkedTokenTTL is how long a checked token is taken on trust before
	// the body is read. Trust here only lets a body be read: every store
	// write checks the token again, so a token revoked or replaced within
	// the TTL is still refused at its next write.
	checkedTokenTTL = 10 * time.Minute
	// maxCheckedTokens bounds the memory the remembered tokens take (about
	// 150 bytes each).
	maxCheckedTokens = 20000
)

// checkedTokens remembers, per worker id, the digest of the last token that
// passed the store's check and when.
type checkedTokens struct {
	clock clock.Clock
	mu    sync.Mutex
	byID  map[string]checkedToken
}

type checkedToken struct {
	hash string
	at   time.Time
}

func newCheckedTokens(c clock.Clock) *checkedTokens {
	return &checkedTokens{clock: c, byID: map[string]checkedToken{}}
}

// known says whether a's token passed the store's check within the TTL.
func (c *checkedTokens) known(a worker.Auth) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.byID[a.WorkerID]
	return ok && t.hash == a.TokenHash && c.clock.Now().Sub(t.at) < checkedTokenTTL
}

// remember records that a's token passed the store's check now.
func (c *checkedTokens) remember(a worker.Auth) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[a.WorkerID]; !ok && len(c.byID) >= maxCheckedTokens {
		// Full: forget an arbitrary entry; its worker pays one read again.
		for id := range c.byID {
			delete(c.byID, id)
			break
		}
	}
	c.byID[a.WorkerID] = checkedToken{hash: a.TokenHash, at: c.clock.Now()}
}

// forget drops a worker's remembered token (it was refused, or deregistered).
func (c *checkedTokens) forget(workerID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, workerID)
}

// authorizeWorker checks a worker's token before its request body is read:
// a made-up token for a known fleet costs one read of the worker item, and
// never the reading and decoding of its body.
func (s *server) authorizeWorker(ctx context.Context, a worker.Auth) error {
	if s.checked.known(a) {
		return nil
	}
	if _, err := s.Store.Authorize(ctx, a); err != nil {
		return err
	}
	s.checked.remember(a)
	return nil
}
