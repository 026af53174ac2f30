package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetq/fleetq/pkg/domain/cost"
)

// Spot prices. The scaler reads EC2's Spot price history for a fleet's
// instance types about once an hour and puts the price in force of each
// type and zone in one item beside the fleet's state; the relay prices a
// Spot job from the item (costs.go). Each process keeps a fleet's item for
// spotPricesCacheFor, so pricing outcomes reads it about once a minute,
// not once a job.

// spotPricesCacheFor is how long a process reuses a fleet's Spot prices.
const spotPricesCacheFor = time.Minute

// spotPricesRetention removes a fleet's prices two days after their last
// read (a fleet taken out of the config leaves nothing behind).
const spotPricesRetention = 48 * time.Hour

// spotPricesItem is a fleet's current Spot prices.
type spotPricesItem struct {
	PK     string             `dynamodbav:"PK"`
	SK     string             `dynamodbav:"SK"`
	ReadMS int64              `dynamodbav:"read_ms"`
	USD    map[string]float64 `dynamodbav:"usd"`
	TTL    int64              `dynamodbav:"ttl"`
}

// spotCache is one fleet's prices as this process last read them.
type spotCache struct {
	loaded time.Time
	prices cost.SpotPrices
}

// PutSpotPrices records a fleet's current Spot prices by instance type and
// zone, replacing the previous read.
func (s *Store) PutSpotPrices(ctx context.Context, fleet string, p cost.SpotPrices) error {
	pk, sk := spotPricesKey(fleet)
	it := spotPricesItem{PK: pk, SK: sk, ReadMS: ms(p.ReadAt), USD: p.USD, TTL: p.ReadAt.Add(spotPricesRetention).Unix()}
	if it.USD == nil {
		it.USD = map[string]float64{}
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("encode Spot prices: %w", err)
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}); err != nil {
		return fmt.Errorf("put Spot prices of %s: %w", fleet, err)
	}
	s.spot.Store(fleet, &spotCache{loaded: s.clock.Now(), prices: p})
	return nil
}

// SpotPrices answers a fleet's current Spot prices (none read yet: empty),
// from this process's copy when it is under a minute old.
func (s *Store) SpotPrices(ctx context.Context, fleet string) (cost.SpotPrices, error) {
	now := s.clock.Now()
	if c, ok := s.spot.Load(fleet); ok {
		if c := c.(*spotCache); now.Sub(c.loaded) < spotPricesCacheFor && !now.Before(c.loaded) {
			return c.prices, nil
		}
	}
	pk, sk := spotPricesKey(fleet)
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key(pk, sk)})
	if err != nil {
		return cost.SpotPrices{}, fmt.Errorf("get Spot prices of %s: %w", fleet, err)
	}
	var p cost.SpotPrices
	if res.Item != nil {
		var it spotPricesItem
		if err := attributevalue.UnmarshalMap(res.Item, &it); err != nil {
			return cost.SpotPrices{}, fmt.Errorf("decode Spot prices of %s: %w", fleet, err)
		}
		p = cost.SpotPrices{ReadAt: fromMS(it.ReadMS), USD: it.USD}
	}
	s.spot.Store(fleet, &spotCache{loaded: now, prices: p})
	return p, nil
}
