package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// ErrKeyExists is a new key whose id is taken (80 random bits: only by a
// broken random source).
var ErrKeyExists = errors.New("an API key with this id exists")

type apiKeyItem struct {
	PK   string `dynamodbav:"PK"`
	SK   string `dynamodbav:"SK"`
	Type string `dynamodbav:"type"`
	APIKey
}

// CreateAPIKey stores a new key.
func (s *Store) CreateAPIKey(ctx context.Context, k APIKey) error {
	pk, sk := apiKeyKey(k.ID)
	av, err := attributevalue.MarshalMap(apiKeyItem{PK: pk, SK: sk, Type: typeAPIKey, APIKey: k})
	if err != nil {
		return fmt.Errorf("encode API key: %w", err)
	}
	e, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))).Build()
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if isConditionFailed(err) {
		return ErrKeyExists
	}
	if err != nil {
		return fmt.Errorf("create API key %s: %w", k.ID, err)
	}
	return nil
}

// GetAPIKey reads a key by its public id (strongly consistent, so a
// revocation holds at once).
func (s *Store) GetAPIKey(ctx context.Context, id string) (APIKey, error) {
	pk, sk := apiKeyKey(id)
	var it apiKeyItem
	found, err := s.getItem(ctx, pk, sk, &it)
	if err != nil {
		return APIKey{}, err
	}
	if !found {
		return APIKey{}, fmt.Errorf("API key %s: %w", id, ErrNotFound)
	}
	return it.APIKey, nil
}

// ListAPIKeys lists the keys of one tenant, or of all ("").
func (s *Store) ListAPIKeys(ctx context.Context, tenant string) ([]APIKey, error) {
	q := byPartition(partitionAPIKeys)
	q.consistent = true
	if tenant != "" {
		f := expression.Name(attrTenantID).Equal(expression.Value(tenant))
		q.filter = &f
	}
	items, err := queryItems[apiKeyItem](ctx, s, q)
	if err != nil {
		return nil, err
	}
	out := make([]APIKey, 0, len(items))
	for _, it := range items {
		out = append(out, it.APIKey)
	}
	return out, nil
}

// RevokeAPIKey revokes a key for good; revoking it again changes nothing.
func (s *Store) RevokeAPIKey(ctx context.Context, id string) (APIKey, error) {
	pk, sk := apiKeyKey(id)
	err := s.updateItem(ctx, update{pk: pk, sk: sk,
		set:  expression.Set(expression.Name(attrRevokedMS), expression.Value(ms(s.clock.Now()))),
		cond: expression.AttributeExists(expression.Name(AttrPK)).And(expression.Name(attrRevokedMS).Equal(expression.Value(0))),
	})
	if err != nil && !errors.Is(err, errConditionFailed) {
		return APIKey{}, fmt.Errorf("revoke API key %s: %w", id, err)
	}
	return s.GetAPIKey(ctx, id)
}

// TouchAPIKey records a use of the key at now, unless one was recorded
// within KeyTouchInterval: reports whether it wrote.
func (s *Store) TouchAPIKey(ctx context.Context, id string, now time.Time) (bool, error) {
	pk, sk := apiKeyKey(id)
	err := s.updateItem(ctx, update{pk: pk, sk: sk,
		set:  expression.Set(expression.Name(attrLastUsedMS), expression.Value(ms(now))),
		cond: expression.AttributeExists(expression.Name(AttrPK)).And(expression.Name(attrLastUsedMS).LessThanEqual(expression.Value(ms(now.Add(-KeyTouchInterval))))),
	})
	if errors.Is(err, errConditionFailed) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("touch API key %s: %w", id, err)
	}
	return true, nil
}
