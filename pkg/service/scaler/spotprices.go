package scaler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fleetq/fleetq/pkg/domain/cost"
	"github.com/fleetq/fleetq/pkg/domain/fleetconfig"
)

// SpotPriceSource reads the Spot price history of instance types in force
// at a time (EC2 DescribeSpotPriceHistory: pkg/aws/spotprice).
type SpotPriceSource interface {
	SpotPrices(ctx context.Context, instanceTypes []string, at time.Time) ([]cost.SpotPoint, error)
}

// SpotPriceStore keeps each fleet's current Spot prices, where the relay
// prices jobs (store.PutSpotPrices).
type SpotPriceStore interface {
	PutSpotPrices(ctx context.Context, fleet string, p cost.SpotPrices) error
}

// Spot price refresh intervals.
const (
	// DefaultSpotPriceEvery is how often a fleet's Spot prices are read.
	DefaultSpotPriceEvery = time.Hour
	// spotPriceRetry is how soon a failed read is tried again; meanwhile
	// the prices last read stay (up to cost.SpotPriceMaxAge), then jobs
	// fall back to the config's flat Spot price.
	spotPriceRetry = 10 * time.Minute
)

// SpotPricer refreshes each fleet's Spot prices from the tick, at most
// once per SpotPricerConfig.Every. When it last read each fleet is kept in
// memory: a cold scaler reads once more, one EC2 call and one write per
// fleet. Build one with NewSpotPricer.
type SpotPricer struct {
	source SpotPriceSource
	store  SpotPriceStore
	every  time.Duration

	mu   sync.Mutex
	next map[string]time.Time // fleet → when to read again
}

// SpotPricerConfig holds a SpotPricer's optional settings; the zero value
// is the defaults.
type SpotPricerConfig struct {
	// Every is how often a fleet's prices are read (default:
	// DefaultSpotPriceEvery).
	Every time.Duration
}

// NewSpotPricer returns the refresher that reads Spot prices from source
// and records them in st. Both are required: NewSpotPricer answers an
// error naming the one missing.
func NewSpotPricer(source SpotPriceSource, st SpotPriceStore, c SpotPricerConfig) (*SpotPricer, error) {
	switch {
	case source == nil:
		return nil, errors.New("scaler.NewSpotPricer: no Spot price source")
	case st == nil:
		return nil, errors.New("scaler.NewSpotPricer: no store")
	case c.Every < 0:
		return nil, fmt.Errorf("scaler.NewSpotPricer: Every %s is negative", c.Every)
	}
	if c.Every == 0 {
		c.Every = DefaultSpotPriceEvery
	}
	return &SpotPricer{source: source, store: st, every: c.Every, next: map[string]time.Time{}}, nil
}

// refresh reads the fleet's Spot prices when they are due and records the
// price in force for each of its instance types in each zone. A failure
// (no permission, throttling) is logged and retried later, never fatal:
// the prices last read stay, then the config's flat price applies.
func (p *SpotPricer) refresh(ctx context.Context, s *Scaler, f *fleetconfig.Fleet, now time.Time) {
	p.mu.Lock()
	due := !now.Before(p.next[f.Slug])
	if due {
		p.next[f.Slug] = now.Add(spotPriceRetry)
	}
	p.mu.Unlock()
	if !due {
		return
	}
	points, err := p.source.SpotPrices(ctx, f.InstanceTypes, now)
	if err == nil {
		err = p.store.PutSpotPrices(ctx, f.Slug, cost.LatestSpot(points, now))
	}
	if err != nil {
		s.log.Warn("spot prices", "fleet", f.Slug, "error", err.Error())
		return
	}
	p.mu.Lock()
	p.next[f.Slug] = now.Add(p.every)
	p.mu.Unlock()
}

// refreshSpotPrices refreshes every fleet's Spot prices that are due.
func (s *Scaler) refreshSpotPrices(ctx context.Context) {
	if s.c.SpotPrices == nil {
		return
	}
	now := s.clock.Now()
	for i := range s.cfg.Fleets {
		s.c.SpotPrices.refresh(ctx, s, &s.cfg.Fleets[i], now)
	}
}
